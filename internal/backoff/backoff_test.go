package backoff

import (
	"slices"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestNext pins the sequence: the floor, doubling, held at the ceiling.
func TestNext(t *testing.T) {
	var got []time.Duration
	var d time.Duration
	for range 6 {
		d = Next(d, 5*time.Millisecond, 50*time.Millisecond)
		got = append(got, d)
	}
	want := []time.Duration{5, 10, 20, 40, 50, 50}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestImports fences the package: the standard library alone, so that any
// loop may use it.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd())
}
