package sandbox_test

import (
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestEnvNameIsTheAPIs holds the domain's rule to the wire's: every name
// of up to three bytes over a set of bytes covering each class, and some
// longer ones, get the same answer from both.
func TestEnvNameIsTheAPIs(t *testing.T) {
	alphabet := []byte("aZ_09=,-. \x00\xff")
	names := []string{"", "PATH", "A1_b", "1A", "A=B", "A,B", "_", "__9", "é"}
	for _, a := range alphabet {
		names = append(names, string(a))
		for _, b := range alphabet {
			names = append(names, string([]byte{a, b}))
			for _, c := range alphabet {
				names = append(names, string([]byte{a, b, c}))
			}
		}
	}
	for _, n := range names {
		if got, want := sandbox.EnvName(n), api.EnvName(n); got != want {
			t.Errorf("EnvName(%q): sandbox says %v, api %v", n, got, want)
		}
	}
}
