package egress

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// chunks yields its pieces one Read at a time.
type chunks []string

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	if n == len((*c)[0]) {
		*c = (*c)[1:]
	} else {
		(*c)[0] = (*c)[0][n:]
	}
	return n, nil
}

func TestBodyReaderReplaces(t *testing.T) {
	bound := []Secret{
		{Placeholder: "PH-ONE", Value: "secret-value-1"},
		{Placeholder: "PH-TWO-LONGER", Value: "sv2"},
	}
	text := "a secret-value-1 b sv2 c secret-value-1secret-value-1 secret-value-sv2 secret-value-"
	want := "a PH-ONE b PH-TWO-LONGER c PH-ONEPH-ONE secret-value-PH-TWO-LONGER secret-value-"
	// Every way of cutting the stream in two, and in three.
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j += 7 {
			src := chunks{text[:i], text[i:j], text[j:]}
			b := &bodyReader{src: io.NopCloser(&src), flush: bufio.NewWriter(io.Discard), rep: newReplacer(bound)}
			got, err := io.ReadAll(b)
			if err != nil || string(got) != want {
				t.Fatalf("cut at %d, %d: got %q %v, want %q", i, j, got, err, want)
			}
		}
	}
}

func TestHeaders(t *testing.T) {
	bound := []Secret{{Placeholder: "PH", Value: "sk-1"}}
	h := http.Header{"Authorization": {"Bearer PH"}, "X-Two": {"PH", "a PH PH"}, "X-None": {"ph"}}
	swapHeaders(h, bound)
	if h.Get("Authorization") != "Bearer sk-1" || h["X-Two"][1] != "a sk-1 sk-1" || h.Get("X-None") != "ph" {
		t.Errorf("swapped: %v", h)
	}
	// One placeholder a prefix of another; a value holding a placeholder.
	two := []Secret{{Placeholder: "PH", Value: "v1"}, {Placeholder: "PH2", Value: "PH"}}
	h = http.Header{"A": {"PH2 PH"}}
	swapHeaders(h, two)
	if got := h.Get("A"); got != "PH v1" {
		t.Errorf("overlapping placeholders: got %q, want %q", got, "PH v1")
	}
	h = http.Header{"X-Echo": {"Bearer sk-1"}, "X-Sk-1": {"v"}}
	scrubHeaders(h, bound)
	var b strings.Builder
	h.Write(&b)
	if strings.Contains(strings.ToLower(b.String()), "sk-1") {
		t.Errorf("scrubbed headers still hold the value:\n%s", b.String())
	}
}
