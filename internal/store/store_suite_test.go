package store

import (
	"testing"
)

// eachStore runs f against every Store implementation, each fresh: one
// suite, two stores. Tests of what only a file can do (its mode, its lock,
// reopening it) stay Bolt's own.
func eachStore(t *testing.T, f func(t *testing.T, st Store)) {
	t.Helper()
	impls := []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"bolt", func(t *testing.T) Store { b, _ := openTest(t); return b }},
		{"memory", func(t *testing.T) Store { return NewMemory() }},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) { f(t, impl.open(t)) })
	}
}

// eachStoreReopened is eachStore for tests of what outlives a reopen:
// reopen closes the store and opens it again (Bolt: the same file; Memory
// has nothing to reopen and returns itself).
func eachStoreReopened(t *testing.T, f func(t *testing.T, st Store, reopen func() Store)) {
	t.Helper()
	t.Run("bolt", func(t *testing.T) {
		b, path := openTest(t)
		f(t, b, func() Store {
			b.Close()
			b2, err := OpenBolt(path)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			t.Cleanup(func() { b2.Close() })
			return b2
		})
	})
	t.Run("memory", func(t *testing.T) {
		m := NewMemory()
		f(t, m, func() Store { return m })
	})
}
