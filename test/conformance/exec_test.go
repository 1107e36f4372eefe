package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// timedWriter records when each write arrived.
type timedWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	firsts []time.Time
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.firsts = append(w.firsts, time.Now())
	return w.buf.Write(p)
}

func TestExec(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		sb := e.create(t, small())
		ctx := t.Context()
		run := func(req api.ExecRequest) *client.ExecResult {
			t.Helper()
			res, err := e.c.Exec(ctx, sb.ID, req, client.ExecOptions{})
			if err != nil {
				t.Fatalf("exec %+v: %v", req.Cmd, err)
			}
			return res
		}
		e.out(t, sb.ID, "mkdir -p sub")
		tests := []struct {
			name       string
			req        api.ExecRequest
			wantCode   int
			wantStdout string
			wantStderr string
		}{
			{"argv", api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-c", "print(6 * 7)"}}}, 0, "42\n", ""},
			{"shell exit code", api.ExecRequest{Cmd: api.Command{Shell: "echo out; echo err >&2; exit 3"}}, 3, "out\n", "err\n"},
			{"stdin", api.ExecRequest{Cmd: api.Command{Argv: []string{"tr", "a-z", "A-Z"}}, Stdin: "shout\n"}, 0, "SHOUT\n", ""},
			{"env", api.ExecRequest{Cmd: api.Command{Shell: "echo $A-$B"}, Env: map[string]string{"A": "1", "B": "two"}}, 0, "1-two\n", ""},
			{"relative cwd", api.ExecRequest{Cmd: api.Command{Argv: []string{"pwd"}}, Cwd: "sub"}, 0, "/workspace/sub\n", ""},
			{"absolute cwd", api.ExecRequest{Cmd: api.Command{Argv: []string{"pwd"}}, Cwd: "/tmp"}, 0, "/tmp\n", ""},
			{"not found", api.ExecRequest{Cmd: api.Command{Argv: []string{"no-such-program"}}}, 127, "", ""},
			{"killed by signal", api.ExecRequest{Cmd: api.Command{Shell: "kill -9 $$"}}, 137, "", ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := run(tt.req)
				if res.ExitCode != tt.wantCode || res.Stdout != tt.wantStdout || (tt.wantStderr != "" && res.Stderr != tt.wantStderr) {
					t.Fatalf("got exit %d stdout %q stderr %q; want %d %q %q", res.ExitCode, res.Stdout, res.Stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
				}
			})
		}

		t.Run("timeout kills the whole tree", func(t *testing.T) {
			// The grandchild leaves the process group with setsid; the
			// timeout must still kill it.
			res := run(api.ExecRequest{
				Cmd:       api.Command{Shell: "setsid sh -c 'echo $$ > /tmp/grandchild; exec sleep 300' & sleep 300"},
				TimeoutMs: 1000,
			})
			if !res.TimedOut {
				t.Fatalf("got %+v, want timed_out", res)
			}
			pid := e.out(t, sb.ID, "cat /tmp/grandchild")
			if got := e.sh(t, sb.ID, "kill -0 "+pid).ExitCode; got == 0 {
				t.Fatalf("grandchild %s still alive after the timeout", pid)
			}
		})

		t.Run("output streams as produced", func(t *testing.T) {
			var w timedWriter
			start := time.Now()
			res, err := e.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Shell: "echo first; sleep 1; echo second"}}, client.ExecOptions{Stdout: &w, Stderr: &w})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("got %+v, %v", res, err)
			}
			end := time.Now()
			if w.buf.String() != "first\nsecond\n" {
				t.Fatalf("got %q, want first then second", w.buf.String())
			}
			if len(w.firsts) < 2 || end.Sub(w.firsts[0]) < 800*time.Millisecond || w.firsts[0].Sub(start) > 900*time.Millisecond {
				t.Fatalf("first chunk was not streamed before the command ended (writes at %v, end %v)", w.firsts, end)
			}
		})

		t.Run("stdout and stderr keep their order", func(t *testing.T) {
			var w timedWriter
			_, err := e.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Shell: "for i in 1 2 3; do echo o$i; sleep 0.05; echo e$i >&2; sleep 0.05; done"}}, client.ExecOptions{Stdout: &w, Stderr: &w})
			if err != nil {
				t.Fatal(err)
			}
			if got := w.buf.String(); got != "o1\ne1\no2\ne2\no3\ne3\n" {
				t.Fatalf("got %q, want interleaved in production order", got)
			}
		})

		t.Run("large output is bounded", func(t *testing.T) {
			res := run(api.ExecRequest{Cmd: api.Command{Shell: "head -c 40000000 /dev/zero | tr '\\0' x"}})
			if res.ExitCode != 0 || len(res.Stdout) > client.OutputCap || !res.StdoutTruncated {
				t.Fatalf("got exit %d, %d bytes kept, truncated %v; want 0, at most %d, true", res.ExitCode, len(res.Stdout), res.StdoutTruncated, client.OutputCap)
			}
		})

		t.Run("output is binary-safe", func(t *testing.T) {
			res := run(api.ExecRequest{Cmd: api.Command{Shell: `printf '\377\376ok\n'; printf 'a\200b' >&2`}})
			if res.Stdout != "\xff\xfeok\n" || res.Stderr != "a\x80b" {
				t.Fatalf("got stdout %q stderr %q, want %q %q", res.Stdout, res.Stderr, "\xff\xfeok\n", "a\x80b")
			}

			// Random bytes, through a writer, hash as they do in the sandbox.
			var w bytes.Buffer
			res, err := e.c.Exec(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Shell: "head -c 300000 /dev/urandom | tee /tmp/r"}}, client.ExecOptions{Stdout: &w})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("got %+v, %v", res, err)
			}
			sum := sha256.Sum256(w.Bytes())
			want := strings.Fields(e.out(t, sb.ID, "sha256sum /tmp/r"))[0]
			if got := hex.EncodeToString(sum[:]); w.Len() != 300000 || got != want {
				t.Fatalf("got %d bytes hashing %s, want 300000 hashing %s", w.Len(), got, want)
			}

			proc, err := e.c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Shell: `printf '\377\376ok\n'`}})
			if err != nil {
				t.Fatal(err)
			}
			done, err := e.c.WaitProcess(ctx, sb.ID, proc.Pid)
			if err != nil || done.Stdout != "\xff\xfeok\n" {
				t.Fatalf("background: got %+v, %v; want stdout %q", done, err, "\xff\xfeok\n")
			}
		})
	})
}

func TestBackgroundServer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		sb := e.create(t, small())
		proc, err := e.c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-m", "http.server", "8000"}}, Cwd: "/etc"})
		if err != nil || proc.Pid == 0 || !proc.Running {
			t.Fatalf("start: got %+v, %v", proc, err)
		}
		var body string
		for i := 0; i < 50; i++ {
			res := e.sh(t, sb.ID, "curl -s http://127.0.0.1:8000/hostname")
			if res.ExitCode == 0 {
				body = res.Stdout
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if strings.TrimSpace(body) != "sandbox" {
			t.Fatalf("server in the sandbox: got %q, want the hostname file", body)
		}
		list, err := e.c.ListProcesses(ctx, sb.ID)
		if err != nil || len(list) == 0 {
			t.Fatalf("list: got %v, %v", list, err)
		}
		killed, err := e.c.KillProcess(ctx, sb.ID, proc.Pid)
		if err != nil {
			t.Fatalf("kill: %v", err)
		}
		done, err := e.c.WaitProcess(ctx, sb.ID, killed.Pid)
		if err != nil || done.Running {
			t.Fatalf("wait: got %+v, %v; want ended", done, err)
		}
		if !strings.Contains(done.Stderr, "GET /hostname") {
			t.Fatalf("server log: got %q, want the request line", done.Stderr)
		}
	})
}
