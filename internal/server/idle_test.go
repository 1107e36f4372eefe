package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// fired reports whether w fired within d.
func fired(w *idleWatch, d time.Duration) bool {
	select {
	case <-w.fired:
		return true
	case <-time.After(d):
		return false
	}
}

func TestIdleWatch(t *testing.T) {
	const after = 300 * time.Millisecond
	for _, state := range []sandbox.State{sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused} {
		t.Run(string(state)+" keeps it", func(t *testing.T) {
			st := storetest.OpenBolt(t)
			ctx := context.Background()
			rec := &sandbox.Record{ID: "sbx_a", Account: "a", State: state}
			if err := st.PutSandbox(ctx, rec); err != nil {
				t.Fatal(err)
			}
			w := newIdleWatch(after, st)
			stop := make(chan struct{})
			defer close(stop)
			go w.run(stop)
			if fired(w, 4*after) {
				t.Fatalf("fired with a sandbox %s", state)
			}
			rec.State = sandbox.StateEnded
			if err := st.PutSandbox(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if !fired(w, 20*after) {
				t.Fatalf("did not fire once the sandbox ended")
			}
		})
	}

	t.Run("a request in flight keeps it", func(t *testing.T) {
		w := newIdleWatch(after, storetest.OpenBolt(t))
		release := make(chan struct{})
		h := w.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		done := make(chan struct{})
		go func() {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/health", nil))
			close(done)
		}()
		stop := make(chan struct{})
		defer close(stop)
		time.Sleep(after / 10) // the request is in flight before the watch starts
		go w.run(stop)
		if fired(w, 4*after) {
			t.Fatalf("fired with a request in flight")
		}
		close(release)
		<-done
		if !fired(w, 20*after) {
			t.Fatalf("did not fire once the request ended")
		}
	})

	t.Run("0 never fires", func(t *testing.T) {
		w := newIdleWatch(0, storetest.OpenBolt(t))
		stop := make(chan struct{})
		go w.run(stop)
		if fired(w, time.Second) {
			t.Fatalf("fired with IdleExit 0")
		}
		close(stop)
	})
}
