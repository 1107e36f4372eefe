package agent

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func TestProcessListOutputAndRunning(t *testing.T) {
	a := newTestAgent(t)
	done := a.background(api.ExecRequest{Cmd: sh(`echo finished`)})
	live := a.background(api.ExecRequest{Cmd: sh(`echo live; sleep 30`)})
	deadline := time.Now().Add(5 * time.Second)
	for p := a.process(done.Pid, "?wait=true&timeout_ms=5000"); p.Running || a.process(live.Pid, "").Stdout != "live\n"; p = a.process(done.Pid, "") {
		if time.Now().After(deadline) {
			t.Fatal("the processes did not get to their state")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range []struct {
		query      string
		pids       []int
		withOutput bool
	}{
		{"", []int{done.Pid, live.Pid}, true},
		{"?output=true", []int{done.Pid, live.Pid}, true},
		{"?output=false", []int{done.Pid, live.Pid}, false},
		{"?running=true", []int{live.Pid}, true},
		{"?running=true&output=false", []int{live.Pid}, false},
	} {
		var list api.ProcessList
		a.doJSON("GET", "/processes"+tc.query, nil, http.StatusOK, &list)
		var pids []int
		for _, p := range list.Processes {
			pids = append(pids, p.Pid)
			if hasOutput := p.Stdout != ""; hasOutput != tc.withOutput {
				t.Errorf("%q: pid %d stdout %q, want output %v", tc.query, p.Pid, p.Stdout, tc.withOutput)
			}
		}
		if !slices.Equal(pids, tc.pids) {
			t.Errorf("%q: got pids %v, want %v", tc.query, pids, tc.pids)
		}
	}
	a.doJSON("POST", "/processes/"+strconv.Itoa(live.Pid)+"/kill", nil, http.StatusOK, nil)
	for _, bad := range []string{"?output=no", "?running=2"} {
		a.wantError("GET", "/processes"+bad, nil, http.StatusBadRequest, "invalid_request")
	}
}
