package e2bcompat

import (
	"strings"
	"testing"
)

// TestAPIKeyShapes: a key in E2B's format is the key as given, a
// withruntime key given behind "e2b_" is the key after it, and nothing
// else is rewritten, so that each string the client sends names one key.
func TestAPIKeyShapes(t *testing.T) {
	e2b := "e2b_" + strings.Repeat("0123456789abcdef", 4)
	for _, c := range []struct{ in, want string }{
		{e2b, e2b},
		{" " + e2b + "\n", e2b},
		{"e2b_wr_abc", "wr_abc"},
		{"wr_abc", "wr_abc"},
		// Only one "e2b_" is taken off, and only before "wr_".
		{"e2b_e2b_wr_abc", "e2b_e2b_wr_abc"},
		{"E2B_wr_abc", "E2B_wr_abc"},
		{"e2b_", "e2b_"},
		{"", ""},
	} {
		if got := apiKey(c.in); got != c.want {
			t.Errorf("apiKey(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
