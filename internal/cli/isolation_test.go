package cli

import (
	"strings"
	"testing"
)

func TestCreateIsolationFlag(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	for _, args := range [][]string{
		{"sandbox", "create", "--isolation", "microvm"},
		{"sandbox", "run", "--isolation", "gvisor", "--", "true"},
		{"sandbox", "create"},
	} {
		if code, _, stderr := run(t, nil, args...); code != 0 {
			t.Fatalf("%v: exit code %d, stderr %q", args, code, stderr)
		}
	}
	created, _, _ := f.snapshot()
	for i, want := range []string{"microvm", "gvisor", ""} {
		if got := created[i].Isolation; got != want {
			t.Errorf("create %d: isolation got %q, want %q", i, got, want)
		}
	}
	code, _, stderr := run(t, nil, "sandbox", "create", "--isolation", "firecracker")
	if code != 2 || !strings.Contains(stderr, "want gvisor or microvm") {
		t.Errorf("bad isolation: got exit %d, stderr %q; want 2 and the allowed values", code, stderr)
	}
}
