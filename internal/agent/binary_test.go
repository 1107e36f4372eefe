package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/withruntime/withruntime/api"
)

// Output is bytes: what a command writes reaches the client exactly, UTF-8
// or not, while text still travels as plain "data".
func TestExecOutputIsBinarySafe(t *testing.T) {
	a := newTestAgent(t)
	random := make([]byte, 200<<10)
	for i := range random {
		random[i] = byte(i*7919 + i/251) // every byte value, no valid long text
	}
	if err := os.WriteFile(filepath.Join(a.cfg.Workspace, "random.bin"), random, 0o644); err != nil {
		t.Fatal(err)
	}
	// 40000 snowmen are 120000 bytes: reads of 32 KiB cut some of them.
	snowmen := strings.Repeat("\u2603", 40000)
	if err := os.WriteFile(filepath.Join(a.cfg.Workspace, "snow.txt"), []byte(snowmen), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		cmd        api.Command
		wantStdout string
		wantStderr string
	}{
		{name: "invalid bytes", cmd: sh(`printf '\377\376ok\n'`), wantStdout: "\xff\xfeok\n"},
		{name: "invalid bytes on stderr", cmd: sh(`printf 'a\200b' >&2`), wantStderr: "a\x80b"},
		{name: "NUL bytes", cmd: sh(`printf 'a\000b'`), wantStdout: "a\x00b"},
		{name: "every byte value", cmd: argv("cat", "random.bin"), wantStdout: string(random)},
		{name: "a lone lead byte at the end", cmd: sh(`printf 'ok\342'`), wantStdout: "ok\xe2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := a.run(api.ExecRequest{Cmd: tt.cmd})
			if res.stdout != tt.wantStdout {
				t.Errorf("got stdout %q, want %q", abbrev(res.stdout), abbrev(tt.wantStdout))
			}
			if res.stderr != tt.wantStderr {
				t.Errorf("got stderr %q, want %q", abbrev(res.stderr), abbrev(tt.wantStderr))
			}
			for _, ev := range res.events {
				if ev.Data != "" && ev.DataB64 != "" {
					t.Errorf("got an event with both data and data_b64: %+v", ev)
				}
			}
		})
	}

	t.Run("text split across reads stays text", func(t *testing.T) {
		res := a.run(api.ExecRequest{Cmd: argv("cat", "snow.txt")})
		if res.stdout != snowmen {
			t.Errorf("got %d bytes of stdout, want the %d of the file", len(res.stdout), len(snowmen))
		}
		for _, ev := range res.events {
			if ev.DataB64 != "" {
				t.Fatalf("got a data_b64 chunk of valid text (a character split across chunks?)")
			}
		}
	})
}

func TestBackgroundOutputIsBinarySafe(t *testing.T) {
	a := newTestAgent(t)
	p := a.background(api.ExecRequest{Cmd: sh(`printf '\377\376ok\n'; printf 'plain' >&2`)})
	p = a.process(p.Pid, "?wait=true&timeout_ms=10000")
	if p.Running {
		t.Fatalf("got %+v, want it ended", p)
	}
	if !utf8.ValidString(p.Stdout) || p.Stdout != "\ufffdok\n" {
		t.Errorf("got stdout text %q, want %q", p.Stdout, "\ufffdok\n")
	}
	if p.StdoutB64 == "" || p.StderrB64 != "" {
		t.Errorf("got stdout_b64 %q stderr_b64 %q, want only stdout's", p.StdoutB64, p.StderrB64)
	}
	if err := p.ExactOutput(); err != nil {
		t.Fatal(err)
	}
	if p.Stdout != "\xff\xfeok\n" || p.Stderr != "plain" {
		t.Errorf("got exact stdout %q stderr %q, want %q %q", p.Stdout, p.Stderr, "\xff\xfeok\n", "plain")
	}
}

func abbrev(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
