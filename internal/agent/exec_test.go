package agent

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func TestExec(t *testing.T) {
	a := newTestAgent(t)
	a.write("sub/dir/.keep", "")
	a.write("plain", "echo hi\n") // not executable
	ws := a.cfg.Workspace
	tests := []struct {
		name       string
		req        api.ExecRequest
		wantCode   int
		wantStdout string
		wantStderr string // a substring
	}{
		{name: "argv", req: api.ExecRequest{Cmd: argv("echo", "hello", "$HOME")}, wantStdout: "hello $HOME\n"},
		{name: "shell", req: api.ExecRequest{Cmd: sh("echo a; echo b >&2; exit 3")}, wantCode: 3, wantStdout: "a\n", wantStderr: "b\n"},
		{name: "stdin", req: api.ExecRequest{Cmd: argv("cat"), Stdin: "line1\nline2"}, wantStdout: "line1\nline2"},
		{name: "stdin may hold NUL bytes", req: api.ExecRequest{Cmd: argv("wc", "-c"), Stdin: "a\x00b"}, wantStdout: "3\n"},
		{name: "huge timeout", req: api.ExecRequest{Cmd: argv("true"), TimeoutMs: math.MaxInt64}},
		{name: "no stdin reads EOF", req: api.ExecRequest{Cmd: argv("cat")}, wantStdout: ""},
		{name: "env", req: api.ExecRequest{Cmd: sh(`echo "$FOO $LANG $HOME"`), Env: map[string]string{"FOO": "bar"}}, wantStdout: "bar C.UTF-8 " + ws + "\n"},
		{name: "env overrides base", req: api.ExecRequest{Cmd: sh(`echo "$LANG"`), Env: map[string]string{"LANG": "X"}}, wantStdout: "X\n"},
		{name: "tag cannot be overridden", req: api.ExecRequest{Cmd: sh(`echo "${#WITHRUNTIME_EXEC_ID}"`), Env: map[string]string{tagVar: "x"}}, wantStdout: "32\n"},
		{name: "default cwd", req: api.ExecRequest{Cmd: argv("pwd")}, wantStdout: ws + "\n"},
		{name: "relative cwd", req: api.ExecRequest{Cmd: argv("pwd"), Cwd: "sub/dir"}, wantStdout: ws + "/sub/dir\n"},
		{name: "absolute cwd", req: api.ExecRequest{Cmd: argv("pwd"), Cwd: ws + "/sub"}, wantStdout: ws + "/sub\n"},
		{name: "path lookup uses the command's PATH", req: api.ExecRequest{Cmd: argv("true"), Env: map[string]string{"PATH": "/nonexistent"}}, wantCode: 127, wantStderr: "true: command not found"},
		{name: "not found", req: api.ExecRequest{Cmd: argv("no-such-command-xyz")}, wantCode: 127, wantStderr: "not found"},
		{name: "not found by path", req: api.ExecRequest{Cmd: argv("./missing")}, wantCode: 127, wantStderr: "no such file"},
		{name: "not executable", req: api.ExecRequest{Cmd: argv("./plain")}, wantCode: 126, wantStderr: "permission denied"},
		{name: "shell not found", req: api.ExecRequest{Cmd: sh("no-such-command-xyz")}, wantCode: 127, wantStderr: "not found"},
		{name: "killed by a signal", req: api.ExecRequest{Cmd: sh("kill -TERM $$")}, wantCode: 128 + 15},
		{name: "runs as the configured uid", req: api.ExecRequest{Cmd: argv("id", "-u")}, wantStdout: strconv.Itoa(a.cfg.UID) + "\n"},
		{name: "utf-8 output", req: api.ExecRequest{Cmd: argv("printf", "h\u00e9llo \u2603")}, wantStdout: "h\u00e9llo \u2603"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := a.run(tt.req)
			if got := res.code(); got != tt.wantCode {
				t.Errorf("got exit code %d, want %d (stderr %q)", got, tt.wantCode, res.stderr)
			}
			if res.stdout != tt.wantStdout {
				t.Errorf("got stdout %q, want %q", res.stdout, tt.wantStdout)
			}
			if !strings.Contains(res.stderr, tt.wantStderr) {
				t.Errorf("got stderr %q, want it to contain %q", res.stderr, tt.wantStderr)
			}
			if res.exit.TimedOut {
				t.Errorf("got timed_out true, want false")
			}
		})
	}
}

func TestExecStartEventHasPid(t *testing.T) {
	a := newTestAgent(t)
	res := a.run(api.ExecRequest{Cmd: sh("echo $$")})
	if got, want := strconv.Itoa(res.events[0].Pid)+"\n", res.stdout; got != want {
		t.Errorf("got start pid %q, want the shell's pid %q", got, want)
	}
}

func TestExecOrder(t *testing.T) {
	a := newTestAgent(t)
	res := a.run(api.ExecRequest{Cmd: sh("echo 1; sleep 0.05; echo 2 >&2; sleep 0.05; echo 3")})
	var got []string
	for _, ev := range res.events {
		got = append(got, ev.Type+":"+strings.TrimSpace(ev.Data))
	}
	want := "start: stdout:1 stderr:2 stdout:3 exit:"
	if strings.Join(got, " ") != want {
		t.Errorf("got events %q, want %q", strings.Join(got, " "), want)
	}
}

func TestExecStreams(t *testing.T) {
	a := newTestAgent(t)
	var first, exit time.Time
	a.stream(t.Context(), api.ExecRequest{Cmd: sh("echo first; sleep 0.3; echo second")}, func(ev api.ExecEvent) bool {
		switch {
		case ev.Type == api.EventStdout && first.IsZero():
			first = time.Now()
		case ev.Type == api.EventExit:
			exit = time.Now()
		}
		return true
	})
	if first.IsZero() || exit.IsZero() {
		t.Fatalf("got no stdout or no exit event")
	}
	if gap := exit.Sub(first); gap < 200*time.Millisecond {
		t.Errorf("got the first chunk %v before the exit, want it as soon as it is printed (300ms before)", gap)
	}
}

func TestExecBadRequests(t *testing.T) {
	a := newTestAgent(t)
	tests := []struct {
		name     string
		body     string
		wantText string
	}{
		{name: "unknown field", body: `{"cmd":["true"],"bogus":1}`, wantText: "bogus"},
		{name: "empty argv", body: `{"cmd":[]}`, wantText: "cmd is empty"},
		{name: "empty argv0", body: `{"cmd":[""]}`, wantText: "cmd is empty"},
		{name: "empty shell", body: `{"cmd":""}`, wantText: "cmd is empty"},
		{name: "no cmd", body: `{}`, wantText: "cmd is empty"},
		{name: "cmd of the wrong type", body: `{"cmd":3}`, wantText: "cmd must be"},
		{name: "bad JSON", body: `{"cmd":`, wantText: "bad JSON"},
		{name: "two values", body: `{"cmd":["true"]} {}`, wantText: "more than one"},
		{name: "NUL in argv", body: `{"cmd":["echo","a\u0000b"]}`, wantText: "NUL"},
		{name: "NUL in shell", body: `{"cmd":"echo a\u0000b"}`, wantText: "NUL"},
		{name: "NUL in env", body: `{"cmd":["true"],"env":{"A":"\u0000"}}`, wantText: "NUL"},
		{name: "= in env name", body: `{"cmd":["true"],"env":{"A=B":"x"}}`, wantText: "env name"},
		{name: "missing cwd", body: `{"cmd":["true"],"cwd":"nope"}`, wantText: "does not exist"},
		{name: "cwd is a file", body: `{"cmd":["true"],"cwd":"f"}`, wantText: "not a directory"},
		{name: "cwd with ..", body: `{"cmd":["true"],"cwd":"../x"}`, wantText: ".."},
		{name: "negative timeout", body: `{"cmd":["true"],"timeout_ms":-1}`, wantText: "timeout_ms"},
	}
	a.write("f", "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := a.wantError("POST", "/exec", strings.NewReader(tt.body), 400, "invalid_request")
			if !strings.Contains(msg, tt.wantText) {
				t.Errorf("got message %q, want it to mention %q", msg, tt.wantText)
			}
		})
	}
}

// treeScript starts a grandchild in a session of its own and a double-forked
// one, records their pids, says "started" once all are recorded, and waits.
const treeScript = `setsid sh -c 'echo $$ > gc.pid; exec sleep 30' &
( sh -c 'echo $$ > dbl.pid; exec sleep 30' & )
echo $$ > main.pid
until [ -s gc.pid ] && [ -s dbl.pid ]; do sleep 0.01; done
echo started
sleep 30`

func TestExecTimeoutKillsTree(t *testing.T) {
	a := newTestAgent(t)
	begun := time.Now()
	res := a.run(api.ExecRequest{Cmd: sh(treeScript), TimeoutMs: 500})
	if took := time.Since(begun); took > 5*time.Second {
		t.Errorf("got exec taking %v, want about 500ms", took)
	}
	if !res.exit.TimedOut {
		t.Errorf("got timed_out false, want true")
	}
	if got, want := res.code(), 128+9; got != want {
		t.Errorf("got exit code %d, want %d", got, want)
	}
	if res.exit.DurationMs < 500 {
		t.Errorf("got duration_ms %d, want at least 500", res.exit.DurationMs)
	}
	for _, f := range []string{"main.pid", "gc.pid", "dbl.pid"} {
		waitGone(t, readPid(t, filepath.Join(a.cfg.Workspace, f)), 2*time.Second)
	}
}

func TestExecDisconnectKillsTree(t *testing.T) {
	a := newTestAgent(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Returning false closes the stream: the client is gone.
	a.stream(ctx, api.ExecRequest{Cmd: sh(treeScript)}, func(ev api.ExecEvent) bool {
		return !(ev.Type == api.EventStdout && strings.Contains(ev.Data, "started"))
	})
	cancel()
	for _, f := range []string{"main.pid", "gc.pid", "dbl.pid"} {
		waitGone(t, readPid(t, filepath.Join(a.cfg.Workspace, f)), 3*time.Second)
	}
}

func TestExecLeftoverChildDoesNotHoldTheStream(t *testing.T) {
	a := newTestAgent(t)
	begun := time.Now()
	res := a.run(api.ExecRequest{Cmd: sh("sleep 5 & echo $! > bg.pid; echo done")})
	if took := time.Since(begun); took > 3*time.Second {
		t.Errorf("got exec taking %v, want it to end soon after the shell", took)
	}
	if res.code() != 0 || res.stdout != "done\n" {
		t.Errorf("got exit %d stdout %q, want 0 %q", res.code(), res.stdout, "done\n")
	}
	pid := readPid(t, filepath.Join(a.cfg.Workspace, "bg.pid"))
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

func TestCompleteUTF8(t *testing.T) {
	snow := []byte("\u2603") // 3 bytes
	tests := []struct {
		name string
		in   []byte
		want int
	}{
		{name: "empty", in: nil, want: 0},
		{name: "ascii", in: []byte("abc"), want: 3},
		{name: "whole rune", in: append([]byte("a"), snow...), want: 4},
		{name: "cut after 1 byte", in: append([]byte("a"), snow[:1]...), want: 1},
		{name: "cut after 2 bytes", in: append([]byte("a"), snow[:2]...), want: 1},
		{name: "invalid byte", in: []byte{'a', 0xff}, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := completeUTF8(tt.in); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}
