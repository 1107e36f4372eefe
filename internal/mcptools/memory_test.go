package mcptools

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// The images a cell's answer carries are reserved before they are kept:
// those the server has no memory for are left out with a note, and what
// was reserved is given back.
func TestResultKeeperReservesImages(t *testing.T) {
	png := base64.StdEncoding.EncodeToString(append([]byte("\x89PNG"), make([]byte, 1000)...))
	for _, tt := range []struct {
		name       string
		room       int64
		wantImages int
		wantNote   bool
	}{
		{"room for all", 1 << 20, maxImages, false},
		{"room for two", 2 * 2 * int64(len(png)), 2, true},
		{"no room", 0, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var held int64
			k := resultKeeper{out: []string{}, budget: OutputCap, reserve: func(n int64) (func(), error) {
				if held+n > tt.room {
					return nil, errors.New("rate_limited")
				}
				held += n
				return func() { held -= n }, nil
			}}
			for range 6 {
				k.add(api.CodeResult{Text: "plot", PNG: png})
			}
			list := k.list()
			note := strings.Contains(list[len(list)-1], "images not shown")
			if len(k.images) != tt.wantImages || note != tt.wantNote {
				t.Errorf("got %d images, note %v (%q), want %d, note %v", len(k.images), note, list[len(list)-1], tt.wantImages, tt.wantNote)
			}
			if held != 2*int64(len(png))*int64(len(k.images)) {
				t.Errorf("held: got %d, want %d for %d images", held, 2*len(png)*len(k.images), len(k.images))
			}
			k.release()
			if held != 0 {
				t.Errorf("held after release: got %d, want 0", held)
			}
		})
	}
}
