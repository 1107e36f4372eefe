package undo

import (
	"errors"
	"slices"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: every package may use it, so it imports
// nothing of this module.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.OwnPackages())
}

// start is a function in the shape the package is for: it makes three
// things and fails after failAfter of them (0: it does not fail).
func start(failAfter int, released *[]string) (retErr error) {
	var u List
	defer u.Run(&retErr)
	for i, name := range []string{"dir", "link", "process"} {
		u.Add(func() { *released = append(*released, name) })
		if i+1 == failAfter {
			return errors.New("step failed")
		}
	}
	return nil
}

func TestRun(t *testing.T) {
	tests := []struct {
		name      string
		failAfter int
		want      []string
	}{
		{"success releases nothing", 0, nil},
		{"the first step fails", 1, []string{"dir"}},
		{"the second step fails", 2, []string{"link", "dir"}},
		{"the last step fails", 3, []string{"process", "link", "dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var released []string
			err := start(tt.failAfter, &released)
			if (err != nil) != (tt.failAfter != 0) {
				t.Fatalf("start = %v, want an error only when a step fails", err)
			}
			if !slices.Equal(released, tt.want) {
				t.Fatalf("released %v, want %v (in reverse order of making)", released, tt.want)
			}
		})
	}
}

// TestReleaseSetsError: a release may add to the function's error, as a
// failed boot adds what its console said.
func TestReleaseSetsError(t *testing.T) {
	f := func() (retErr error) {
		var u List
		defer u.Run(&retErr)
		u.Add(func() { retErr = errors.Join(retErr, errors.New("console: panic")) })
		return errors.New("boot failed")
	}
	if got := f(); got == nil || got.Error() != "boot failed\nconsole: panic" {
		t.Fatalf("got %v, want the boot's error and the console's", got)
	}
}

// TestRunForgets: a List run once releases nothing the second time.
func TestRunForgets(t *testing.T) {
	var u List
	n := 0
	u.Add(func() { n++ })
	err := errors.New("failed")
	u.Run(&err)
	u.Run(&err)
	if n != 1 {
		t.Fatalf("released %d times, want once", n)
	}
}
