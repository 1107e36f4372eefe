package manager

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// Auto-resume (issue 27): a paused sandbox created with AutoResume is
// resumed by the call that reaches its agent (Agent) or a port (DialPort),
// once, and that call then goes on.

// wakeAgent is a fake agent: /health answers 200 "ok", and a port's
// upgrade is taken and echoes what it reads.
func wakeAgent() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Upgrade") != portUpgrade {
			io.WriteString(w, "ok")
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+portUpgrade+"\r\n\r\n")
		io.Copy(conn, conn)
	})
}

// reach is one way a call reaches a sandbox: it fails unless the call got
// through to the (fake) agent.
type reach func(ctx context.Context, m *Manager, id string) error

var reaches = []struct {
	name string
	call reach
}{
	{"agent", func(ctx context.Context, m *Manager, id string) error {
		rt, err := m.Agent(ctx, "acct", id)
		if err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox-agent/health", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
			return sandbox.Errorf(sandbox.KindInternal, "the agent answered %q, want ok", b)
		}
		return nil
	}},
	{"port", func(ctx context.Context, m *Manager, id string) error {
		conn, err := m.DialPort(ctx, "acct", id, 8000)
		if err != nil {
			return err
		}
		defer conn.Close()
		io.WriteString(conn, "ping\n")
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || line != "ping\n" {
			return sandbox.Errorf(sandbox.KindInternal, "the port echoed %q (%v), want ping", line, err)
		}
		return nil
	}},
}

// pausedRig is a rig with a fake agent and a sandbox of req, paused.
func pausedRig(t *testing.T, req service.CreateRequest, config func(*Config)) (*rig, *sandbox.Record) {
	t.Helper()
	r := newRig(t, config)
	r.be.agent = wakeAgent()
	rec := r.create(req)
	if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
		t.Fatal(err)
	}
	return r, rec
}

// wantAfter fails the test unless the sandbox id is in state want, as
// the record, the manager and the backend agree, and the backend was
// asked resumes resumes in all.
func (r *rig) wantAfter(id string, want sandbox.State, resumes int) *sandbox.Record {
	r.t.Helper()
	got := r.consistent(id)
	if got.State != want {
		r.t.Fatalf("after the call: got %s, want %s", got.State, want)
	}
	if n := r.be.count("resume"); n != resumes {
		r.t.Errorf("backend resumes: got %d, want %d", n, resumes)
	}
	return got
}

func TestAutoResumeOnUse(t *testing.T) {
	for _, tc := range reaches {
		t.Run(tc.name, func(t *testing.T) {
			r, rec := pausedRig(t, service.CreateRequest{AutoResume: true}, nil)
			if !rec.Spec.AutoResume {
				t.Fatal("the record's spec: got auto_resume false, want true")
			}
			r.clock.Advance(time.Minute)
			if err := tc.call(t.Context(), r.m, rec.ID); err != nil {
				t.Fatalf("a call on the paused sandbox: got %v, want it to go through", err)
			}
			got := r.wantAfter(rec.ID, sandbox.StateRunning, 1)
			if want := r.clock.Now().Add(got.Spec.Timeout); got.PausedAt != nil || !got.LeaseEndsAt.Equal(want) {
				t.Errorf("paused at %v, lease ends at %v; want nil, %v (a full timeout from the wake)", got.PausedAt, got.LeaseEndsAt, want)
			}
			// Running now: the next call does not resume again.
			if err := tc.call(t.Context(), r.m, rec.ID); err != nil {
				t.Fatalf("a second call: %v", err)
			}
			r.wantAfter(rec.ID, sandbox.StateRunning, 1)
		})
	}
}

// TestAutoResumeNotAsked: a paused sandbox created without auto_resume
// stays paused (conflict), and an ended one with it stays ended.
func TestAutoResumeNotAsked(t *testing.T) {
	for _, c := range []struct {
		name  string
		auto  bool
		want  sandbox.State
		kinds []sandbox.Kind
	}{
		{"paused without auto_resume", false, sandbox.StatePaused, []sandbox.Kind{sandbox.KindConflict}},
		{"ended", true, sandbox.StateEnded, []sandbox.Kind{sandbox.KindConflict, sandbox.KindNotFound}},
	} {
		for _, tc := range reaches {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				r, rec := pausedRig(t, service.CreateRequest{AutoResume: c.auto}, nil)
				if c.want == sandbox.StateEnded {
					if _, err := r.m.Stop(t.Context(), "acct", rec.ID); err != nil {
						t.Fatal(err)
					}
				}
				if err := tc.call(t.Context(), r.m, rec.ID); !slices.Contains(c.kinds, sandbox.KindOf(err)) {
					t.Fatalf("got %v, want one of %v", err, c.kinds)
				}
				r.wantAfter(rec.ID, c.want, 0)
			})
		}
	}
}

func TestAutoResumeAfterLeasePause(t *testing.T) {
	r := newRig(t, nil)
	r.be.agent = wakeAgent()
	rec := r.create(service.CreateRequest{TimeoutSeconds: 60, OnLeaseEnd: "pause", AutoResume: true})
	r.clock.Advance(60 * time.Second)
	r.m.Reap(t.Context())
	r.wantAfter(rec.ID, sandbox.StatePaused, 0)
	if err := reaches[0].call(t.Context(), r.m, rec.ID); err != nil {
		t.Fatalf("exec after the lease's pause: %v", err)
	}
	r.wantAfter(rec.ID, sandbox.StateRunning, 1)
}

func TestParallelAutoResumesResumeOnce(t *testing.T) {
	for _, tc := range reaches {
		t.Run(tc.name, func(t *testing.T) {
			r, rec := pausedRig(t, service.CreateRequest{AutoResume: true}, nil)
			r.be.delay = 20 * time.Millisecond
			for i, err := range race(func() error { return tc.call(context.Background(), r.m, rec.ID) }) {
				if err != nil {
					t.Errorf("call %d: got %v, want every call to go through", i, err)
				}
			}
			r.wantAfter(rec.ID, sandbox.StateRunning, 1)
		})
	}
}

// TestAutoResumeRefused: a wake that the account's concurrency refuses
// fails the call with the resume's error, and the sandbox stays paused.
func TestAutoResumeRefused(t *testing.T) {
	r, rec := pausedRig(t, service.CreateRequest{AutoResume: true}, nil)
	if err := r.st.PutAccount(t.Context(), store.Account{ID: "acct", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	r.create(service.CreateRequest{})
	for _, tc := range reaches {
		if err := tc.call(t.Context(), r.m, rec.ID); sandbox.KindOf(err) != sandbox.KindConcurrency {
			t.Errorf("%s: got %v, want concurrency_limit_reached", tc.name, err)
		}
	}
	r.wantAfter(rec.ID, sandbox.StatePaused, 0)
}

// TestAutoResumeOfSnapshotsAndForks: a sandbox started from a snapshot
// resumes on use as its own create says, whatever its source did; a fork
// as its source does.
func TestAutoResumeOfSnapshotsAndForks(t *testing.T) {
	r, _ := snapRig(t, nil)
	ctx := t.Context()
	src := r.create(service.CreateRequest{TimeoutSeconds: 600, AutoResume: true})
	snap, err := r.m.Snapshot(ctx, "acct", src.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []bool{false, true} {
		rec := r.create(service.CreateRequest{Snapshot: snap.ID, AutoResume: want})
		if rec.Spec.AutoResume != want {
			t.Errorf("started from a snapshot with auto_resume %v: got %v", want, rec.Spec.AutoResume)
		}
	}
	_, forks, err := r.m.Fork(ctx, "acct", "", src.ID, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !forks[0].Spec.AutoResume {
		t.Error("a fork of a sandbox with auto_resume: got auto_resume false")
	}
}
