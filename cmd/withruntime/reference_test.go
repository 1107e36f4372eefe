package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/CLI.md from the command tree")

// refPath is the committed reference, generated from the tree.
const refPath = "../../docs/CLI.md"

// TestCLIReference fails when docs/CLI.md is not what the command tree
// generates; -update rewrites it.
func TestCLIReference(t *testing.T) {
	got := app().Reference()
	if *update {
		if err := os.WriteFile(refPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s is stale: go test ./cmd/withruntime -run TestCLIReference -update", refPath)
	}
}

// serve and setup have their own help, with the flags SPEC.md names.
func TestHookHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--help"}, []string{"usage: withruntime serve [flags]\n", "--listen", "--data-dir", "--idle-exit", "--pid-file", "--allow-trial"}},
		{[]string{"setup", "--help"}, []string{"usage: withruntime setup [flags]\n", "--cache-dir", "--source"}},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := app().Main(tt.args, strings.NewReader(""), &stdout, &stderr)
		if code != 0 || stderr.Len() != 0 {
			t.Errorf("%v: got exit %d stderr %q, want 0 and nothing", tt.args, code, stderr.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: got %q, want %q in it", tt.args, stdout.String(), w)
			}
		}
	}
}
