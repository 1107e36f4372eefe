package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// binary is the product's withruntime, built once from the checkout for
// these tests (TestMain removes it).
var binary struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// withruntime builds ../cmd/withruntime (the main module) the first time.
func withruntime(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "withruntime-deploy-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "withruntime")
		out, err := exec.Command("go", "build", "-C", "..", "-o", binary.path, "./cmd/withruntime").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("building withruntime: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// productFlags are the flags `withruntime CMD --help` lists: every flag a
// deployment here passes must be one, so a misspelt or invented flag fails
// a test rather than a start.
func productFlags(t *testing.T, cmd string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(withruntime(t), cmd, "--help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-[a-zA-Z], )?(--[a-z0-9-]+)`).FindAllSubmatch(out, -1) {
		flags[string(m[1])] = true
	}
	if !flags["--store"] || !flags["--data-dir"] {
		t.Fatalf("withruntime %s --help lists no --store and --data-dir:\n%s", cmd, out)
	}
	return flags
}

// requiredFlags are what each command needs to run as part of a cluster.
var requiredFlags = map[string][]string{
	"serve": {"--store", "--listen", "--data-dir"},
	"node":  {"--store", "--data-dir", "--listen"},
}

// parseArgs reads "CMD --flag VALUE ..." (every flag the deployments use
// takes a value) into the command and its flags.
func parseArgs(t *testing.T, args []string) (string, map[string]string) {
	t.Helper()
	if len(args) == 0 {
		t.Fatal("no arguments")
	}
	cmd, flags := args[0], map[string]string{}
	if _, ok := requiredFlags[cmd]; !ok {
		t.Fatalf("command %q: want serve or node", cmd)
	}
	known := productFlags(t, cmd)
	rest := args[1:]
	for len(rest) > 0 {
		f := rest[0]
		if !strings.HasPrefix(f, "--") || strings.Contains(f, "=") {
			t.Fatalf("%s: got argument %q, want --flag VALUE pairs", cmd, f)
		}
		if !known[f] {
			t.Errorf("%s: unknown flag %s", cmd, f)
		}
		if len(rest) < 2 || strings.HasPrefix(rest[1], "--") {
			t.Fatalf("%s: flag %s has no value", cmd, f)
		}
		if _, dup := flags[f]; dup {
			t.Errorf("%s: flag %s given twice", cmd, f)
		}
		flags[f] = rest[1]
		rest = rest[2:]
	}
	for _, f := range requiredFlags[cmd] {
		if flags[f] == "" {
			t.Errorf("%s: missing %s", cmd, f)
		}
	}
	return cmd, flags
}
