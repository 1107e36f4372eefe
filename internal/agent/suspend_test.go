package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// TestSuspendKeepsForegroundCommands: when the link is suspended (a
// snapshot, a pause), a foreground command's stream ends at once without
// its exit event, the command goes on in the process table, and a follow
// from the bytes the stream gave carries the rest of its output and its
// exit, with no gap and no repeat. A follow in progress lets go too.
func TestSuspendKeepsForegroundCommands(t *testing.T) {
	a := newTestAgent(t)
	marker := a.write("go.txt", "")
	cmd := fmt.Sprintf("echo one; while [ ! -s %s ]; do sleep 0.05; done; echo two; echo err >&2; exit 3", marker)
	var pid int
	var got []string
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		a.stream(context.Background(), api.ExecRequest{Cmd: sh(cmd)}, func(ev api.ExecEvent) bool {
			switch ev.Type {
			case api.EventStart:
				pid = ev.Pid
			case api.EventStdout:
				got = append(got, ev.Data)
				if ev.Data == "one\n" {
					a.srv.Suspending()
				}
			default:
				got = append(got, ev.Type)
			}
			return true
		})
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the foreground stream did not let go at the suspend")
	}
	if strings.Join(got, "") != "one\n" || pid == 0 {
		t.Fatalf("stream before the suspend: %q (pid %d), want one line and no exit", got, pid)
	}
	a.srv.Resumed()
	a.write("go.txt", "go")
	evs := a.follow(pid, fmt.Sprintf("?stdout_offset=%d&stderr_offset=0", len("one\n")), nil)
	var out, errOut string
	var exit *int
	for _, ev := range evs {
		switch ev.Type {
		case api.EventStdout:
			out += ev.Data
		case api.EventStderr:
			errOut += ev.Data
		case api.EventExit:
			exit = ev.ExitCode
		}
	}
	if out != "two\n" || errOut != "err\n" || exit == nil || *exit != 3 {
		t.Fatalf("followed on: stdout %q stderr %q exit %v, want \"two\\n\", \"err\\n\", 3", out, errOut, exit)
	}
}

// TestSuspendEndsFollows: a follow in progress ends at a suspend, the
// process going on.
func TestSuspendEndsFollows(t *testing.T) {
	a := newTestAgent(t)
	var p api.Process
	a.doJSON("POST", "/exec", jsonBody(t, api.ExecRequest{Cmd: sh("sleep 30"), Background: true}), 201, &p)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.follow(p.Pid, "", func(ev api.ExecEvent) bool {
			if ev.Type == api.EventStart {
				a.srv.Suspending()
			}
			return true
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follow did not let go at the suspend")
	}
	a.srv.Resumed()
	if !alive(p.Pid) {
		t.Fatal("the followed process ended with its follow")
	}
}
