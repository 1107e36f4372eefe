package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// startPty starts cmd (the login shell when empty) on an 80x24 terminal.
func (a *testAgent) startPty(cmd api.Command) api.Process {
	a.t.Helper()
	var p api.Process
	a.doJSON("POST", "/exec", jsonBody(a.t, api.ExecRequest{Cmd: cmd, Background: true, Pty: &api.PtySize{Cols: 80, Rows: 24}}), http.StatusCreated, &p)
	if p.Pid == 0 || !p.Pty || !p.StdinOpen {
		a.t.Fatalf("got %+v, want a running terminal with its stdin open", p)
	}
	return p
}

func (a *testAgent) input(pid int, s string) {
	a.t.Helper()
	a.doJSON("POST", fmt.Sprintf("/processes/%d/stdin", pid), strings.NewReader(s), http.StatusNoContent, nil)
}

// waitOutput follows pid's terminal until its output (from the oldest
// kept byte) contains want, and returns that output and the exit event
// if the stream ended first.
func (a *testAgent) waitOutput(pid int, want string) (string, *api.ExecEvent) {
	a.t.Helper()
	var out string
	var exit *api.ExecEvent
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(a.t.Context(), 20*time.Second)
	defer cancel()
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/processes/%d/stream", a.url, pid), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var ev api.ExecEvent
			if err := dec.Decode(&ev); err != nil {
				return
			}
			switch ev.Type {
			case api.EventStdout:
				b, err := ev.Output()
				if err != nil {
					return
				}
				out += b
				if want != "" && strings.Contains(out, want) {
					return
				}
			case api.EventExit:
				exit = &ev
				return
			}
		}
	}()
	<-done
	if want != "" && !strings.Contains(out, want) && exit == nil {
		a.t.Fatalf("terminal %d: waited for %q, got %q", pid, want, out)
	}
	return out, exit
}

func TestPtyShell(t *testing.T) {
	a := newTestAgent(t)
	p := a.startPty(sh("stty size; tty; echo ok"))
	out, exit := a.waitOutput(p.Pid, "")
	if exit == nil || exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("got exit %+v, output %q", exit, out)
	}
	if !strings.Contains(out, "24 80\r\n") || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "ok\r\n") {
		t.Fatalf("got %q, want the size 24 80, a /dev/pts terminal and ok, with CRLF line ends", out)
	}

	// The login shell by default, resized, read from, ended with exit 3.
	p = a.startPty(api.Command{})
	a.input(p.Pid, "echo zero=$0\n")
	a.waitOutput(p.Pid, "zero=-")
	a.doJSON("POST", fmt.Sprintf("/processes/%d/resize", p.Pid), strings.NewReader(`{"cols":123,"rows":45}`), http.StatusNoContent, nil)
	a.input(p.Pid, "stty size\n")
	a.waitOutput(p.Pid, "45 123")
	a.input(p.Pid, "exit 3\n")
	_, exit = a.waitOutput(p.Pid, "")
	if exit == nil || *exit.ExitCode != 3 {
		t.Fatalf("got exit %+v, want code 3", exit)
	}
	a.wantError("POST", fmt.Sprintf("/processes/%d/resize", p.Pid), strings.NewReader(`{"cols":10,"rows":10}`), http.StatusConflict, "conflict")
}

func TestPtyInterruptAndReattach(t *testing.T) {
	a := newTestAgent(t)
	p := a.startPty(sh("echo started; sleep 100; echo after"))
	a.waitOutput(p.Pid, "started")
	// A second client attaching gets the kept output again.
	a.waitOutput(p.Pid, "started")
	// ^C is the terminal's: SIGINT to the foreground process group, once
	// sleep runs in it (a ^C between the shell's fork and the exec of
	// sleep is the forked shell's, as on any terminal).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.Pid, p.Pid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			if comm, _ := os.ReadFile("/proc/" + f[0] + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep did not start")
		}
	}
	a.input(p.Pid, "\x03")
	out, exit := a.waitOutput(p.Pid, "")
	if exit == nil || *exit.ExitCode != 130 {
		t.Fatalf("got exit %+v (output %q), want 130 (SIGINT)", exit, out)
	}
	if strings.Contains(out, "after") {
		t.Fatalf("got %q: the shell went on after ^C", out)
	}
}

func TestPtyKeptOutputBounded(t *testing.T) {
	a := newTestAgent(t)
	// 200 KiB of output, then the end mark: only the last PtyOutputKept
	// bytes are replayed.
	p := a.startPty(sh("head -c 204800 /dev/zero | tr '\\0' x; echo; echo END"))
	a.doJSON("GET", fmt.Sprintf("/processes/%d?wait=true", p.Pid), nil, http.StatusOK, nil)
	out, exit := a.waitOutput(p.Pid, "")
	if exit == nil || !strings.HasSuffix(out, "END\r\n") {
		t.Fatalf("got exit %+v and output ending %q", exit, out[max(0, len(out)-20):])
	}
	if len(out) > api.PtyOutputKept {
		t.Fatalf("replayed %d bytes, more than the %d kept", len(out), api.PtyOutputKept)
	}
	var info api.Process
	a.doJSON("GET", fmt.Sprintf("/processes/%d", p.Pid), nil, http.StatusOK, &info)
	if !info.StdoutTruncated || info.StdinOpen {
		t.Fatalf("got %+v, want truncated output and stdin closed", info)
	}
}

func TestPtyRefused(t *testing.T) {
	a := newTestAgent(t)
	for _, body := range []string{
		`{"cmd":"sh","pty":{"cols":80,"rows":24}}`,
		`{"cmd":"sh","background":true,"stdin":"x","pty":{"cols":80,"rows":24}}`,
		`{"cmd":"sh","background":true,"pty":{"cols":0,"rows":24}}`,
		`{"cmd":"sh","background":true,"pty":{"cols":80,"rows":1001}}`,
	} {
		a.wantError("POST", "/exec", strings.NewReader(body), http.StatusBadRequest, "invalid_request")
	}
	var p api.Process
	a.doJSON("POST", "/exec", jsonBody(t, api.ExecRequest{Cmd: sh("sleep 100"), Background: true}), http.StatusCreated, &p)
	a.wantError("POST", fmt.Sprintf("/processes/%d/resize", p.Pid), strings.NewReader(`{"cols":10,"rows":10}`), http.StatusConflict, "conflict")

	// The bound on running terminals, and room again once one ends.
	var pids []int
	for range api.MaxPtys {
		pids = append(pids, a.startPty(argv("sleep", "100")).Pid)
	}
	a.wantError("POST", "/exec", strings.NewReader(`{"cmd":"sh","background":true,"pty":{"cols":80,"rows":24}}`), http.StatusConflict, "conflict")
	a.doJSON("POST", fmt.Sprintf("/processes/%d/kill", pids[0]), nil, http.StatusOK, nil)
	a.startPty(argv("sleep", "100"))
}
