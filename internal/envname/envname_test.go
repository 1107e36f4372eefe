package envname

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

func TestValid(t *testing.T) {
	for name, want := range map[string]bool{
		"OPENAI_API_KEY": true, "_x1": true, "a": true, "A1_b": true, "__9": true,
		"": false, "1A": false, "A-B": false, "A=B": false, "A,B": false, "Ä": false, "A\x00": false, "A B": false,
	} {
		if got := Valid(name); got != want {
			t.Errorf("Valid(%q): got %v, want %v", name, got, want)
		}
	}
}

// TestImports fences the package: api imports it, and api imports only the
// standard library and this.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd())
}
