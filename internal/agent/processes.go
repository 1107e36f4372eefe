package agent

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
)

// maxProcs bounds the process table; the oldest ended processes go first.
const maxProcs = 1000

// killWait is how long POST .../kill waits for the process to be gone.
const killWait = 2 * time.Second

// procTable holds the background processes, running and ended.
type procTable struct {
	max int

	mu    sync.Mutex // guards byPid and order
	byPid map[int]*proc
	order []int // pids, oldest first
}

func newProcTable(max int) *procTable {
	return &procTable{max: max, byPid: map[int]*proc{}}
}

func (t *procTable) add(p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byPid[p.pid]; ok {
		// The pid was reused: the ended process that held it goes.
		t.drop(p.pid)
	}
	t.byPid[p.pid] = p
	t.order = append(t.order, p.pid)
	for i := 0; len(t.order) > t.max && i < len(t.order); {
		pid := t.order[i]
		select {
		case <-t.byPid[pid].done:
			t.drop(pid)
		default:
			i++
		}
	}
}

func (t *procTable) drop(pid int) {
	delete(t.byPid, pid)
	for i, q := range t.order {
		if q == pid {
			t.order = append(t.order[:i], t.order[i+1:]...)
			return
		}
	}
}

func (t *procTable) get(pid int) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byPid[pid]
}

func (t *procTable) list() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*proc, 0, len(t.order))
	for _, pid := range t.order {
		out = append(out, t.byPid[pid])
	}
	return out
}

// handleProcessList lists the background processes, oldest first, with
// their output unless ?output=false, and only those still running with
// ?running=true: a caller that wants to know what runs does not get every
// kept process's output (up to 2 * api.OutputCap each).
func (s *Server) handleProcessList(w http.ResponseWriter, r *http.Request) error {
	output := true
	if r.URL.Query().Get("output") != "" {
		var err error
		if output, err = queryBool(r, "output"); err != nil {
			return err
		}
	}
	running, err := queryBool(r, "running")
	if err != nil {
		return err
	}
	procs := s.procs.list()
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].started.Before(procs[j].started) })
	list := api.ProcessList{Processes: make([]api.Process, 0, len(procs))}
	for _, p := range procs {
		info := p.infoWith(output)
		if running && !info.Running {
			continue
		}
		list.Processes = append(list.Processes, info)
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) lookup(r *http.Request) (*proc, error) {
	v := r.PathValue("pid")
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		return nil, invalidf("pid must be a positive integer, not %q", v)
	}
	p := s.procs.get(pid)
	if p == nil {
		return nil, notFoundf("no background process %d", pid)
	}
	return p, nil
}

// handleProcessGet answers with the process; with wait=true it first waits
// until the process ends, timeout_ms passes or the client goes away.
func (s *Server) handleProcessGet(w http.ResponseWriter, r *http.Request) error {
	wait, err := queryBool(r, "wait")
	if err != nil {
		return err
	}
	timeoutMs, err := queryInt(r, "timeout_ms")
	if err != nil {
		return err
	}
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	if wait {
		var expired <-chan time.Time
		if timeoutMs > 0 {
			t := time.NewTimer(millis(timeoutMs))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-p.done:
		case <-expired:
		case <-r.Context().Done():
			return nil
		}
	}
	writeJSON(w, http.StatusOK, p.info())
	return nil
}

// handleProcessKill kills the process tree and answers once it has ended
// (or after killWait, still running). Killing an ended process is no error.
func (s *Server) handleProcessKill(w http.ResponseWriter, r *http.Request) error {
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	p.kill()
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-r.Context().Done():
		return nil
	}
	writeJSON(w, http.StatusOK, p.info())
	return nil
}
