package deploy

import (
	"strings"
	"testing"
)

// productFlags are the flags each command takes (SPEC.md names the cluster
// ones; the manager's optional flags beyond these are the operator's to
// add). Every deployment here uses only these, so a misspelt or invented
// flag fails a test rather than a start.
var productFlags = map[string]map[string]bool{
	"serve": set("--store", "--listen", "--data-dir", "--cache-dir", "--max-lease", "--retention",
		"--concurrency", "--prices", "--max-conns", "--allow-trial", "--e2b-listen"),
	"node": set("--store", "--data-dir", "--listen", "--advertise", "--shared-checkpoints",
		"--node-lease", "--cache-dir", "--overcommit", "--pool", "--egress-permit", "--egress-hosts"),
}

// requiredFlags are what each command needs to run as part of a cluster.
var requiredFlags = map[string][]string{
	"serve": {"--store", "--listen", "--data-dir"},
	"node":  {"--store", "--data-dir", "--listen"},
}

func set(xs ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// parseArgs reads "CMD --flag VALUE ..." (every flag the deployments use
// takes a value) into the command and its flags.
func parseArgs(t *testing.T, args []string) (string, map[string]string) {
	t.Helper()
	if len(args) == 0 {
		t.Fatal("no arguments")
	}
	cmd, flags := args[0], map[string]string{}
	known, ok := productFlags[cmd]
	if !ok {
		t.Fatalf("command %q: want serve or node", cmd)
	}
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
