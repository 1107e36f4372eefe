package manager

import (
	"slices"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// What a node registers: the isolations it runs, its default first.
func TestIsolationsDefaultFirst(t *testing.T) {
	vmFirst := newRig(t, func(c *Config) {
		multi, err := sandbox.NewMulti(sandbox.IsolationMicroVM,
			namedFake{c.Backend.(*fakeBackend), sandbox.IsolationGVisor},
			namedFake{newFakeBackend(), sandbox.IsolationMicroVM})
		if err != nil {
			t.Fatal(err)
		}
		c.Backend = multi
	})
	plain := newRig(t, func(c *Config) { c.Backend = namedFake{newFakeBackend(), sandbox.IsolationGVisor} })
	tests := []struct {
		name string
		m    *Manager
		want []string
	}{
		{"microvm default of two", vmFirst.m, []string{sandbox.IsolationMicroVM, sandbox.IsolationGVisor}},
		{"gvisor only", plain.m, []string{sandbox.IsolationGVisor}},
	}
	for _, tt := range tests {
		if got := tt.m.Isolations(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
