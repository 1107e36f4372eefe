package agent

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
)

const (
	// maxContexts bounds the code contexts of one sandbox, the default one
	// included: each is a kernel of its own, tens of MiB.
	maxContexts = 16
	// defaultContext is the id of the context a request naming none uses.
	defaultContext = "default"
	language       = "python"
)

// codeTable holds the sandbox's code contexts.
type codeTable struct {
	// driverArgv runs the driver; nil is python3 with the embedded script.
	// Tests set a stand-in where no kernel can run.
	driverArgv []string

	mu     sync.Mutex // guards ctxs, seq and closed
	ctxs   map[string]*codeContext
	seq    int
	closed bool
}

// codeContext is one kernel's context: its cells run one at a time.
type codeContext struct {
	id  string
	cwd string
	env map[string]string
	seq int // creation order, for the list

	turn chan struct{} // holds a token while a cell runs: the queue

	mu      sync.Mutex // guards drv and removed
	drv     *driver    // nil: started on next use
	removed bool
}

func newCodeTable() *codeTable {
	return &codeTable{ctxs: map[string]*codeContext{}}
}

func (cx *codeContext) info() api.CodeContext {
	return api.CodeContext{ID: cx.id, Language: language, Cwd: cx.cwd}
}

// lookup is the context id; the default one is made when missing and
// makeDefault says so (its env and cwd then come from the caller).
func (s *Server) lookupContext(id string, makeDefault func() (*codeContext, error)) (*codeContext, error) {
	t := s.code
	t.mu.Lock()
	cx := t.ctxs[id]
	t.mu.Unlock()
	if cx != nil {
		return cx, nil
	}
	if id != defaultContext || makeDefault == nil {
		return nil, notFoundf("no code context %.80q", id)
	}
	return makeDefault()
}

// addContext makes a context with id ("" for a new one) and starts its
// driver. An existing id is returned as it is.
func (s *Server) addContext(id, cwd string, env map[string]string) (*codeContext, error) {
	t := s.code
	isDefault := id != ""
	t.mu.Lock()
	if cx := t.ctxs[id]; id != "" && cx != nil {
		t.mu.Unlock()
		return cx, nil
	}
	if t.closed {
		t.mu.Unlock()
		return nil, conflictf("the agent is shutting down")
	}
	if len(t.ctxs) >= maxContexts {
		t.mu.Unlock()
		return nil, conflictf("a sandbox has at most %d code contexts: remove one first", maxContexts)
	}
	if id == "" {
		var err error
		if id, err = newContextID(); err != nil {
			t.mu.Unlock()
			return nil, err
		}
	}
	t.seq++
	cx := &codeContext{id: id, cwd: cwd, env: maps.Clone(env), seq: t.seq, turn: make(chan struct{}, 1)}
	t.ctxs[id] = cx
	t.mu.Unlock()
	if testHookContextAdded != nil {
		testHookContextAdded(cx)
	}
	// A removal or Close since the unlock marked cx removed: a driver
	// started now would be one nothing kills, outside maxContexts.
	cx.mu.Lock()
	defer cx.mu.Unlock()
	if cx.removed {
		return nil, s.goneErr(cx.id)
	}
	d, err := s.startDriver(cx)
	if err != nil && !isDefault {
		// A new context whose driver cannot start (in its cwd, say) is
		// refused rather than made for every cell to fail.
		cx.removed = true
		t.mu.Lock()
		if t.ctxs[cx.id] == cx {
			delete(t.ctxs, cx.id)
		}
		t.mu.Unlock()
		// %v: the failure is the agent's, whatever errno it carries.
		return nil, fmt.Errorf("the context cannot be made: %v", err)
	}
	// The default context's driver that cannot start now is tried again
	// by the first cell, which reports why.
	cx.drv = d
	return cx, nil
}

// testHookContextAdded, when set, runs between a context's creation and
// its driver's start: tests race a removal there.
var testHookContextAdded func(*codeContext)

// goneErr is the error for a context that was removed: not found, or the
// agent shutting down.
func (s *Server) goneErr(id string) error {
	t := s.code
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return conflictf("the agent is shutting down")
	}
	return notFoundf("no code context %.80q", id)
}

func (s *Server) listContexts() []api.CodeContext {
	t := s.code
	t.mu.Lock()
	all := make([]*codeContext, 0, len(t.ctxs))
	for _, cx := range t.ctxs {
		all = append(all, cx)
	}
	t.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	out := make([]api.CodeContext, 0, len(all))
	for _, cx := range all {
		out = append(out, cx.info())
	}
	return out
}

// removeContext kills the context's kernel and forgets it. A running cell
// ends with DeadKernelError; cells waiting their turn answer not_found.
func (s *Server) removeContext(id string) error {
	t := s.code
	t.mu.Lock()
	cx := t.ctxs[id]
	delete(t.ctxs, id)
	t.mu.Unlock()
	if cx == nil {
		return notFoundf("no code context %.80q", id)
	}
	cx.mu.Lock()
	cx.removed = true
	d := cx.drv
	cx.drv = nil
	cx.mu.Unlock()
	if d != nil {
		d.kill("the context was removed while the cell ran: its kernel was killed")
	}
	return nil
}

// restart replaces the context's kernel with a new one, state lost. A
// running cell ends with DeadKernelError.
func (s *Server) restart(cx *codeContext, why string) error {
	cx.mu.Lock()
	defer cx.mu.Unlock()
	if cx.removed {
		return s.goneErr(cx.id)
	}
	if cx.drv != nil {
		cx.drv.kill(why)
	}
	var err error
	cx.drv, err = s.startDriver(cx)
	return err
}

// driverOf is the context's driver, started when there is none.
func (s *Server) driverOf(cx *codeContext) (*driver, error) {
	cx.mu.Lock()
	defer cx.mu.Unlock()
	if cx.removed {
		return nil, s.goneErr(cx.id)
	}
	if cx.drv == nil {
		d, err := s.startDriver(cx)
		if err != nil {
			return nil, err
		}
		cx.drv = d
	}
	return cx.drv, nil
}

// dropDriver forgets d (killing it) so that the next cell starts anew.
func (cx *codeContext) dropDriver(d *driver) {
	d.kill("")
	cx.mu.Lock()
	if cx.drv == d {
		cx.drv = nil
	}
	cx.mu.Unlock()
}

// closeCode stops every kernel and waits (a few seconds at most) for the
// drivers to end.
func (s *Server) closeCode() {
	t := s.code
	t.mu.Lock()
	t.closed = true
	all := make([]*codeContext, 0, len(t.ctxs))
	for _, cx := range t.ctxs {
		all = append(all, cx)
	}
	t.mu.Unlock()
	var drvs []*driver
	for _, cx := range all {
		// Removed: nothing (a cell, a restart, a racing addContext)
		// starts a driver for it any more.
		cx.mu.Lock()
		cx.removed = true
		if cx.drv != nil {
			cx.drv.kill("the agent shut down")
			drvs = append(drvs, cx.drv)
		}
		cx.mu.Unlock()
	}
	timer := time.NewTimer(closeWait)
	defer timer.Stop()
	for _, d := range drvs {
		select {
		case <-d.exited:
		case <-timer.C:
			return
		}
	}
}

func newContextID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "ctx_" + hex.EncodeToString(b), nil
}
