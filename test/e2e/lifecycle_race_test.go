package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// Parallel lifecycle calls on one sandbox (issue 8, item 7), against a real
// server and real gVisor sandboxes: each call waits for the one under way
// and re-reads the sandbox, so there is one winner, the others answer 409,
// and no call's failure cleanup touches what the winner made. The unit
// tier's counterpart is internal/manager/concurrency_test.go.

// outcome is one raced call's answer.
type outcome struct {
	op     string
	status int
	code   string
	err    error
}

func (o outcome) String() string {
	if o.err != nil {
		return fmt.Sprintf("%s: %v", o.op, o.err)
	}
	return fmt.Sprintf("%s: %d %s", o.op, o.status, o.code)
}

// raceCalls sends every request at once (method and path each) and
// returns their answers in the same order. It does not use call: a
// goroutine must not end the test.
func raceCalls(s *testenv.Server, key string, reqs [][2]string) []outcome {
	out := make([]outcome, len(reqs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].op = r[0] + " " + r[1]
			var body io.Reader
			if strings.HasSuffix(r[1], "/extend") {
				body = strings.NewReader(`{"timeout_seconds":300}`)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, r[0], s.URL+r[1], body)
			req.Header.Set("Authorization", "Bearer "+key)
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out[i].err = err
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			out[i].status, out[i].code = resp.StatusCode, errorCode(data)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// execEcho runs echo in the sandbox and fails the test unless it answers.
func execEcho(t *testing.T, c sbx, id, word string) {
	t.Helper()
	status, body := call(t, c.s, c.key, "POST", "/v1/sandboxes/"+id+"/exec",
		strings.NewReader(`{"cmd":"cat /workspace/mark; echo `+word+`"}`))
	if status != http.StatusOK || !strings.Contains(string(body), word) || !strings.Contains(string(body), "before") {
		t.Fatalf("exec in %s: got %d %s, want 200 with the mark and %q", id, status, body, word)
	}
}

func TestParallelResumesOfOnePausedSandbox(t *testing.T) {
	s := testenv.StartServer(t)
	c := sbx{t, s, s.Key}
	status, sb, code := c.create(`{"vcpus":1,"memory_mib":512}`)
	if status != http.StatusCreated {
		t.Fatalf("create: got %d %s", status, code)
	}
	if st := c.exec(sb.ID, "echo before > /workspace/mark", false); st != http.StatusOK {
		t.Fatalf("exec: got %d", st)
	}
	// Rounds: unserialized resumes overlap only when their requests land
	// within milliseconds of each other, which one round may miss.
	const n, rounds = 6, 3
	reqs := make([][2]string, n)
	for i := range reqs {
		reqs[i] = [2]string{"POST", "/v1/sandboxes/" + sb.ID + "/resume"}
	}
	for round := range rounds {
		if st, body := call(t, s, s.Key, "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil); st != http.StatusOK {
			t.Fatalf("round %d: pause: got %d %s", round, st, body)
		}
		outs := raceCalls(s, s.Key, reqs)
		var ok, conflict int
		for _, o := range outs {
			switch {
			case o.err == nil && o.status == http.StatusOK:
				ok++
			case o.err == nil && o.status == http.StatusConflict && o.code == "conflict":
				conflict++
			}
		}
		if ok != 1 || conflict != n-1 {
			t.Fatalf("round %d: %d parallel resumes: got %v, want one 200 and %d 409 conflict\n%s", round, n, outs, n-1, s.Log)
		}
		if got := c.get(sb.ID); got.State != "running" {
			t.Fatalf("round %d: after the resumes: got %s (%s: %s), want running", round, got.State, got.EndReason, got.EndMessage)
		}
		execEcho(t, c, sb.ID, fmt.Sprintf("alive-%d", round))
	}
	// A second round on a running sandbox: every resume is a conflict.
	for _, o := range raceCalls(s, s.Key, reqs[:3]) {
		if o.err != nil || o.status != http.StatusConflict {
			t.Errorf("resume of a running sandbox: got %v, want 409", o)
		}
	}
	execEcho(t, c, sb.ID, "still")
}

func TestParallelStopPauseResumeOnOneSandbox(t *testing.T) {
	s := testenv.StartServer(t)
	c := sbx{t, s, s.Key}
	var ids []string
	for _, withStop := range []bool{false, true} {
		status, sb, code := c.create(`{"vcpus":1,"memory_mib":512}`)
		if status != http.StatusCreated {
			t.Fatalf("create: got %d %s", status, code)
		}
		ids = append(ids, sb.ID)
		if st := c.exec(sb.ID, "echo before > /workspace/mark", false); st != http.StatusOK {
			t.Fatalf("exec: got %d", st)
		}
		base := "/v1/sandboxes/" + sb.ID
		reqs := [][2]string{
			{"POST", base + "/pause"}, {"POST", base + "/resume"}, {"POST", base + "/extend"},
			{"POST", base + "/pause"}, {"POST", base + "/resume"}, {"GET", base},
			{"POST", base + "/pause"}, {"POST", base + "/resume"},
		}
		if withStop {
			reqs = slices.Insert(reqs, 3, [2]string{"DELETE", base})
		}
		outs := raceCalls(s, s.Key, reqs)
		for _, o := range outs {
			if o.err != nil || (o.status != http.StatusOK && o.status != http.StatusConflict) {
				t.Errorf("got %v, want 200 or 409", o)
			}
		}
		got := c.get(sb.ID)
		switch {
		case withStop:
			if got.State != "ended" || got.EndReason != "stopped" {
				t.Fatalf("with a stop in the mix: got %s (%s: %s), want ended (stopped)\n%v", got.State, got.EndReason, got.EndMessage, outs)
			}
		case got.State == "paused":
			if st, body := call(t, s, s.Key, "POST", base+"/resume", nil); st != http.StatusOK {
				t.Fatalf("resume after the mix: got %d %s", st, body)
			}
			fallthrough
		case got.State == "running":
			execEcho(t, c, sb.ID, "alive")
		default:
			t.Fatalf("without a stop: got %s (%s: %s), want running or paused\n%v", got.State, got.EndReason, got.EndMessage, outs)
		}
	}
	// Nothing left behind once both are stopped.
	for _, id := range ids {
		call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+id, nil)
	}
	if got := leftovers(t, s.DataDir, ids); len(got) > 0 {
		t.Errorf("left on the host after the stops: %v", got)
	}
}
