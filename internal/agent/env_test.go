package agent

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// putEnv sets the sandbox's env and checks the 204.
func (a *testAgent) putEnv(env map[string]string) {
	a.t.Helper()
	resp, b := a.do("PUT", "/env", jsonBody(a.t, map[string]any{"env": env}))
	if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
		a.t.Fatalf("PUT /env: got %d %q, want 204 and no body", resp.StatusCode, b)
	}
}

// envOf runs `env` and returns what it printed as a map.
func envOf(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("got env line %q, want NAME=value", line)
		}
		m[k] = v
	}
	return m
}

func TestEnvPut(t *testing.T) {
	a := newTestAgent(t)
	a.putEnv(map[string]string{"FOO": "bar", "LANG": "de_DE.UTF-8", "SPACED": "a b=c"})

	got := envOf(t, a.run(api.ExecRequest{Cmd: argv("env")}).stdout)
	want := map[string]string{
		"FOO": "bar", "LANG": "de_DE.UTF-8", "SPACED": "a b=c",
		// The defaults stay under what was not set.
		"PATH": a.cfg.Home + "/.local/bin:" + a.cfg.BaseEnv["PATH"], "HOME": a.cfg.Home, "USER": "user",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("foreground: got %s=%q, want %q", k, got[k], v)
		}
	}

	// A request's own env still goes over the sandbox's.
	res := a.run(api.ExecRequest{Cmd: sh(`echo "$FOO"`), Env: map[string]string{"FOO": "mine"}})
	if res.stdout != "mine\n" {
		t.Errorf("got %q, want the request's FOO over the sandbox's", res.stdout)
	}

	// Background commands take it too.
	p := a.background(api.ExecRequest{Cmd: sh(`echo "$FOO $LANG"`)})
	p = a.process(p.Pid, "?wait=true&timeout_ms=5000")
	if p.Stdout != "bar de_DE.UTF-8\n" {
		t.Errorf("background: got %q, want %q", p.Stdout, "bar de_DE.UTF-8\n")
	}
}

// TestEnvLocalBin: a command that `pip install --user` put in ~/.local/bin
// runs by name, as in a Debian login shell; a PATH the sandbox or the
// request sets is taken as it is.
func TestEnvLocalBin(t *testing.T) {
	a := newTestAgent(t)
	bin := filepath.Join(a.cfg.Home, ".local", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "wr-local-tool"), []byte("#!/bin/sh\necho local\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := a.run(api.ExecRequest{Cmd: argv("wr-local-tool")})
	if res.code() != 0 || res.stdout != "local\n" {
		t.Errorf("got exit %d %q, want ~/.local/bin/wr-local-tool to run by name", res.code(), res.stdout)
	}
	got := envOf(t, a.run(api.ExecRequest{Cmd: argv("env")}).stdout)["PATH"]
	if want := bin + ":" + a.cfg.BaseEnv["PATH"]; got != want {
		t.Errorf("got PATH=%q, want %q", got, want)
	}
	got = envOf(t, a.run(api.ExecRequest{Cmd: argv("env"), Env: map[string]string{"PATH": "/bin"}}).stdout)["PATH"]
	if got != "/bin" {
		t.Errorf("got PATH=%q, want the request's /bin as it is", got)
	}
}

func TestEnvPutReplaces(t *testing.T) {
	a := newTestAgent(t)
	a.putEnv(map[string]string{"FIRST": "1", "LANG": "X", "KEPT": "old"})
	a.putEnv(map[string]string{"KEPT": "new", "SECOND": "2"})
	got := envOf(t, a.run(api.ExecRequest{Cmd: argv("env")}).stdout)
	if v, ok := got["FIRST"]; ok {
		t.Errorf("got FIRST=%q, want it gone with the first set", v)
	}
	if got["LANG"] != "C.UTF-8" {
		t.Errorf("got LANG=%q, want the default C.UTF-8 back", got["LANG"])
	}
	if got["KEPT"] != "new" || got["SECOND"] != "2" {
		t.Errorf("got KEPT=%q SECOND=%q, want new 2", got["KEPT"], got["SECOND"])
	}

	a.putEnv(map[string]string{})
	got = envOf(t, a.run(api.ExecRequest{Cmd: argv("env")}).stdout)
	if _, ok := got["KEPT"]; ok {
		t.Errorf("got KEPT after an empty set, want it gone")
	}
}

func TestEnvPutInvalid(t *testing.T) {
	a := newTestAgent(t)
	a.putEnv(map[string]string{"GOOD": "yes"})
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"empty name", `{"env":{"":"x"}}`, 400, codeInvalid},
		{"name with =", `{"env":{"A=B":"x"}}`, 400, codeInvalid},
		{"name with NUL", `{"env":{"A\u0000":"x"}}`, 400, codeInvalid},
		{"value with NUL", `{"env":{"A":"x\u0000y"}}`, 400, codeInvalid},
		{"unknown field", `{"env":{},"extra":1}`, 400, codeInvalid},
		{"env missing", `{}`, 400, codeInvalid},
		{"env null", `{"env":null}`, 400, codeInvalid},
		{"not a string", `{"env":{"A":1}}`, 400, codeInvalid},
		{"not JSON", `env=1`, 400, codeInvalid},
		{"two values", `{"env":{}}{"env":{}}`, 400, codeInvalid},
		{"too large", `{"env":{"A":"` + strings.Repeat("x", maxEnvBody) + `"}}`, 413, codeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.wantError("PUT", "/env", strings.NewReader(tt.body), tt.status, tt.code)
		})
	}
	// A refused set changes nothing.
	got := envOf(t, a.run(api.ExecRequest{Cmd: argv("env")}).stdout)
	if got["GOOD"] != "yes" {
		t.Errorf("got GOOD=%q after refused sets, want yes", got["GOOD"])
	}
	if _, ok := got["A"]; ok {
		t.Errorf("got A=%q, want no part of a refused set applied", got["A"])
	}
}

// TestEnvPutConcurrent runs sets and execs at once (meant for -race): every
// command sees one whole set, never a mix of two.
func TestEnvPutConcurrent(t *testing.T) {
	a := newTestAgent(t)
	a.putEnv(map[string]string{"X": "0", "Y": "0"})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				v := fmt.Sprint(w*100 + i)
				a.putEnv(map[string]string{"X": v, "Y": v})
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 8 {
				res := a.run(api.ExecRequest{Cmd: sh(`echo "$X $Y"`)})
				x, y, _ := strings.Cut(strings.TrimSpace(res.stdout), " ")
				if x == "" || x != y {
					t.Errorf("got X=%q Y=%q, want one set's equal values", x, y)
				}
			}
		}()
	}
	wg.Wait()
}
