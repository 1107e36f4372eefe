package client

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

func TestRunCodeLineBound(t *testing.T) {
	big := strings.Repeat("A", 4<<20-10)
	tests := []struct {
		name    string
		events  []api.CodeEvent
		wantErr bool
	}{
		// Two 4 MiB fields: near the server's 8 MiB line guard.
		{"under the server's guard", []api.CodeEvent{{Type: "result", Result: &api.CodeResult{PNG: big, JPEG: big}}, {Type: "end", ExecutionCount: 2}}, false},
		{"over the bound", []api.CodeEvent{{Type: "stdout", Text: strings.Repeat("x", maxCodeLine+10)}, {Type: "end"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				streamCode(w, tt.events...)
			}))
			ex, err := c.RunCode(t.Context(), "s", api.CodeRequest{Code: "1"}, CodeOptions{})
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				if len(ex.Results) != 1 || len(ex.Results[0].PNG) != len(big) || ex.ExecutionCount != 2 {
					t.Fatalf("got %d results, count %d, want the whole result and count 2", len(ex.Results), ex.ExecutionCount)
				}
				return
			}
			var te *TransportError
			if !errors.As(err, &te) || !errors.Is(err, errLineTooLong) {
				t.Fatalf("got %T %v, want a *TransportError for a line too long", err, err)
			}
		})
	}
}
