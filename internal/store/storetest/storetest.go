// Package storetest gives the tests of the packages above internal/store
// a store: the embedded one (Bolt) on a file in the test's temporary
// directory, closed when the test ends. Tests run on a real store rather
// than a separate in-memory one, so that what they prove holds of what a
// server runs; one that needs a store to fail on demand wraps this one.
//
// It imports internal/store and nothing else of this module.
package storetest

import (
	"path/filepath"
	"testing"

	"github.com/withruntime/withruntime/internal/store"
)

// OpenBolt opens an empty embedded store in t's temporary directory, closed
// at cleanup. It does not flush each commit to disk (NoSync): the file
// dies with the test, and a flush costs a few milliseconds a write, which
// made the manager's unit tests about twice as slow as on the in-memory
// store this replaced (about 9.5 s against 5); without it they take as
// long as they did.
func OpenBolt(t testing.TB) *store.Bolt {
	t.Helper()
	b, err := store.OpenBoltWith(filepath.Join(t.TempDir(), store.BoltFile), store.BoltOptions{NoSync: true})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
