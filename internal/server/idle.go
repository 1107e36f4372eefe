package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// idleWatch ends a server that has had nothing to do for Config.IdleExit:
// no request in flight and no sandbox alive (starting, running or paused).
// The local daemon runs with it, so that it does not stay behind once its
// owner is done; a sandbox that lives keeps it running, since only a
// running server enforces its lease.
type idleWatch struct {
	after time.Duration
	st    store.Store
	fired chan struct{}

	mu       sync.Mutex
	inflight int
	since    time.Time // when the server last had something to do
}

func newIdleWatch(after time.Duration, st store.Store) *idleWatch {
	return &idleWatch{after: after, st: st, fired: make(chan struct{}), since: time.Now()}
}

// wrap counts h's requests in flight; a request's end restarts the idle
// period.
func (w *idleWatch) wrap(h http.Handler) http.Handler {
	if w.after <= 0 {
		return h
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.inflight++
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			w.inflight--
			w.since = time.Now()
			w.mu.Unlock()
		}()
		h.ServeHTTP(rw, r)
	})
}

// run closes w.fired once the server has been idle for w.after, or
// returns when stop is closed. 0 never fires.
func (w *idleWatch) run(stop <-chan struct{}) {
	if w.after <= 0 {
		return
	}
	tick := min(max(w.after/10, 100*time.Millisecond), 5*time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		busy := w.alive()
		w.mu.Lock()
		if busy || w.inflight > 0 {
			w.since = time.Now()
		}
		idle := time.Since(w.since)
		w.mu.Unlock()
		if idle >= w.after {
			close(w.fired)
			return
		}
	}
}

// alive says whether a sandbox is starting, running or paused. A failed
// lookup counts as alive: exiting on a doubt could leave a lease unenforced.
func (w *idleWatch) alive() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, err := w.st.ListSandboxes(ctx, store.SandboxFilter{States: []sandbox.State{
		sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused}})
	return err != nil || len(recs) > 0
}
