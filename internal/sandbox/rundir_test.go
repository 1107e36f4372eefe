package sandbox

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestRunDir(t *testing.T) {
	a, b := RunDir("/run/x", "/var/lib/a"), RunDir("/run/x", "/var/lib/b")
	if a == b {
		t.Fatalf("two data dirs share the run dir %s", a)
	}
	if a != RunDir("/run/x", "/var/lib/a") {
		t.Fatal("RunDir is not a function of its inputs")
	}
	long := RunDir("/run/x", "/"+strings.Repeat("d", 4000))
	if filepath.Dir(long) != "/run/x" || len(filepath.Base(long)) != 12 {
		t.Fatalf("RunDir of a long data dir: %s, want /run/x and 12 characters", long)
	}
}
