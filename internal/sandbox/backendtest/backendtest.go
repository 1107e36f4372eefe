// Package backendtest is the suite every sandbox.Backend passes: the
// methods of the seam and its optional capabilities (Meter, Warmer,
// Freezer, CheckpointDigester, Networked), with the error kinds each must
// return pinned where the backends agree. It is run against gVisor, the
// microVM backend and the manager's in-memory fake, so that the fake's
// likeness to the real backends is checked rather than claimed (as
// containerd's snapshotter test suite is run against every snapshotter).
//
// It imports the domain (internal/sandbox), the agent's wire types (api,
// for AgentShell), the network package (Egress's listener and plumbing)
// and the standard library: never a backend, so that each backend's own
// tests can call it. It wraps
// each backend in sandbox.Adapter and asks it which optional capabilities
// the backend has, as the platform's callers do: the capabilities tried
// are the ones the platform will use.
package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Options says what the suite may expect of a backend, and what its
// caller gives it to look inside a sandbox.
type Options struct {
	// Spec is the spec every sandbox of the suite is started with.
	Spec sandbox.Spec
	// Reopen ends old as the end of its server process would (its
	// connections to its sandboxes close, the sandboxes run on) and
	// returns a second backend on the same host state, as a restarted
	// server makes: Attach is tried on it. nil: Attach is tried on the
	// backend under test itself (an in-memory backend has no state
	// outside itself to find again).
	Reopen func(t *testing.T, old sandbox.Backend) sandbox.Backend
	// Shell, when set, runs cmd in the sandbox through its agent and
	// returns its output, trimmed. The suite then checks that a file
	// written before a pause is there after the resume. nil: the suite
	// only dials the agent (a fake has no shell).
	Shell func(ctx context.Context, inst sandbox.Instance, cmd string) (string, error)
	// Networked, when set, makes a backend like newBackend's whose
	// sandboxes are wired to egress services (sandbox.EgressWiring), for
	// the Network case: a sandbox.Networked backend's sandboxes then have
	// an address. nil: that case is skipped.
	Networked func(t *testing.T) sandbox.Backend
	// Slow runs the cases marked slow (those booting more than one
	// sandbox, pausing and warming); without it they are skipped with
	// the reason. A backend that boots in well under a second (gVisor,
	// the fake) sets it always.
	Slow bool
	// SlowReason is the skip message of a slow case ("" for a generic
	// one): say there how to run them.
	SlowReason string
	// Wait bounds how long the suite waits for a sandbox to stop (Done)
	// after Destroy, Pause or Sweep; 0: 30 seconds.
	Wait time.Duration
}

// Run runs the suite against backends newBackend makes, one per case,
// each with a fresh host state. name labels the run.
func Run(t *testing.T, name string, newBackend func(t *testing.T) sandbox.Backend, opts Options) {
	if opts.Wait == 0 {
		opts.Wait = 30 * time.Second
	}
	s := &suite{opts: opts}
	for _, c := range []struct {
		name string
		slow bool
		run  func(t *testing.T, b *sandbox.Adapter)
	}{
		{"UnknownID", false, s.unknownID},
		{"Lifecycle", false, s.lifecycle},
		{"Attach", false, s.attach},
		{"Sweep", false, s.sweep},
		{"Network", false, s.network},
		{"StartTwice", true, s.startTwice},
		{"PauseResume", true, s.pauseResume},
		{"Warm", true, s.warm},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.slow && !opts.Slow {
				reason := opts.SlowReason
				if reason == "" {
					reason = "slow case on this backend"
				}
				t.Skip(reason)
			}
			begun := time.Now()
			var b sandbox.Backend
			if c.name == "Network" {
				if opts.Networked == nil {
					t.Skip("no backend with egress wiring (Options.Networked)")
				}
				b = opts.Networked(t)
			} else {
				b = newBackend(t)
			}
			c.run(t, sandbox.Adapt(b))
			t.Logf("%s %s took %v", name, c.name, time.Since(begun).Round(time.Millisecond))
		})
	}
}

type suite struct {
	opts Options
}

// newID returns a sandbox id no sandbox on this host has, in the form
// the platform gives them ("sbx" and 16 hex digits): a backend may refuse
// any other (gVisor's shared checkpoints do), and cgroups are shared by
// every test process on the host.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "sbx" + hex.EncodeToString(b[:])
}

// start boots id and registers its destruction for the end of the test.
func (s *suite) start(t *testing.T, b sandbox.Backend, id string) sandbox.Instance {
	t.Helper()
	t.Cleanup(func() { b.Destroy(context.Background(), id) })
	begun := time.Now()
	inst, err := b.Start(t.Context(), id, s.opts.Spec)
	if err != nil {
		t.Fatalf("Start %s: %v", id, err)
	}
	if inst == nil {
		t.Fatalf("Start %s: no instance and no error", id)
	}
	t.Logf("Start took %v", time.Since(begun).Round(time.Millisecond))
	return inst
}

// answers checks that the sandbox's agent can be dialed, and that it runs
// a command when the suite has a shell.
func (s *suite) answers(t *testing.T, inst sandbox.Instance, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), s.opts.Wait)
	defer cancel()
	c, err := inst.DialAgent(ctx)
	if err != nil {
		t.Fatalf("%s: DialAgent: %v", what, err)
	}
	c.Close()
	if s.opts.Shell != nil {
		if got, err := s.opts.Shell(ctx, inst, "echo alive"); err != nil || got != "alive" {
			t.Fatalf("%s: echo alive: got %q, %v", what, got, err)
		}
	}
	select {
	case <-inst.Done():
		r, msg := inst.Cause()
		t.Fatalf("%s: the instance is done (%s: %s)", what, r, msg)
	default:
	}
}

// stopped checks that inst ends within the wait, with a cause.
func (s *suite) stopped(t *testing.T, inst sandbox.Instance, what string) {
	t.Helper()
	select {
	case <-inst.Done():
		// The manager reads the cause as soon as Done fires: it must
		// say why by then.
		if r, _ := inst.Cause(); r == "" {
			t.Errorf("%s: the instance is done with no cause", what)
		}
	case <-time.After(s.opts.Wait):
		t.Fatalf("%s: the instance is not done after %v", what, s.opts.Wait)
	}
}

// wantKind fails t unless err is of kind k.
func wantKind(t *testing.T, what string, err error, k sandbox.Kind) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want %s", what, k)
	} else if got := sandbox.KindOf(err); got != k {
		t.Errorf("%s: got %v (kind %s), want kind %s", what, err, got, k)
	}
}

// wantErr fails t unless err is an error. Used where the backends do not
// agree on a kind yet: the call must fail, whatever it says.
func wantErr(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error", what)
	}
}

// unknownID: every call about a sandbox the backend never started fails
// (Pause with not_found), except Destroy and Sweep, which have nothing to
// do; no capability reports anything of it.
func (s *suite) unknownID(t *testing.T, b *sandbox.Adapter) {
	ctx := t.Context()
	id := newID()
	if b.Name() == "" {
		t.Error("Name: empty")
	}
	wantKind(t, "Pause of an unknown id", b.Pause(ctx, id), sandbox.KindNotFound)
	if inst, err := b.Resume(ctx, id, s.opts.Spec); err == nil {
		t.Errorf("Resume of an unknown id: got %v, no error", inst)
	}
	if inst, err := b.Attach(ctx, id, s.opts.Spec); err == nil {
		t.Errorf("Attach of an unknown id: got %v, no error", inst)
	}
	for range 2 {
		if err := b.Destroy(ctx, id); err != nil {
			t.Errorf("Destroy of an unknown id: %v (Destroy is idempotent)", err)
		}
	}
	if err := b.Sweep(ctx, func(string) bool { return true }); err != nil {
		t.Errorf("Sweep keeping all: %v", err)
	}
	if b.Supports(sandbox.CapMeter) {
		_, err := b.CPUTime(id)
		wantErr(t, "CPUTime of an unknown id", err)
	}
	if b.Supports(sandbox.CapFreeze) {
		wantErr(t, "Freeze of an unknown id", b.Freeze(ctx, id))
		wantErr(t, "Thaw of an unknown id", b.Thaw(ctx, id))
	}
	if b.Supports(sandbox.CapWarm) {
		wantErr(t, "Claim of an unknown id", b.Claim(ctx, id))
	}
	if b.Supports(sandbox.CapDigest) {
		if got := b.CheckpointDigest(id); got != "" {
			t.Errorf("CheckpointDigest of an unknown id: got %q, want none", got)
		}
		if inst, err := b.ResumeDigest(ctx, id, s.opts.Spec, ""); err == nil {
			t.Errorf("ResumeDigest of an unknown id: got %v, no error", inst)
		}
	}
	if b.Supports(sandbox.CapNetwork) {
		if a, ok := b.SandboxAddr(id); ok {
			t.Errorf("SandboxAddr of an unknown id: got %v", a)
		}
		wantErr(t, "SetOnline of an unknown id", b.SetOnline(id, false))
	}
}

// lifecycle: a started sandbox answers, is metered, freezes and thaws
// without ending, and Destroy ends it (Done fires) and is idempotent;
// afterwards it is unknown (Pause: not_found).
func (s *suite) lifecycle(t *testing.T, b *sandbox.Adapter) {
	ctx := t.Context()
	id := newID()
	inst := s.start(t, b, id)
	s.answers(t, inst, "started")
	if b.Supports(sandbox.CapMeter) {
		if d, err := b.CPUTime(id); err != nil || d < 0 {
			t.Errorf("CPUTime of a live sandbox: got %v, %v", d, err)
		}
	}
	// A Resume of a sandbox that runs finds no checkpoint: it fails and
	// leaves the sandbox running.
	if again, err := b.Resume(ctx, id, s.opts.Spec); err == nil {
		t.Errorf("Resume of a running sandbox: got %v, no error", again)
	}
	s.answers(t, inst, "after a failed Resume")
	if b.Supports(sandbox.CapFreeze) {
		if err := b.Freeze(ctx, id); err != nil {
			t.Fatalf("Freeze: %v", err)
		}
		select {
		case <-inst.Done():
			t.Fatal("a frozen sandbox ended: Freeze keeps it")
		case <-time.After(100 * time.Millisecond):
		}
		if err := b.Thaw(ctx, id); err != nil {
			t.Fatalf("Thaw: %v", err)
		}
		s.answers(t, inst, "thawed")
		// Destroy ends a frozen sandbox too (a fenced node's sandboxes
		// are frozen when their records end).
		if err := b.Freeze(ctx, id); err != nil {
			t.Fatalf("Freeze again: %v", err)
		}
	}
	if err := b.Destroy(ctx, id); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	s.stopped(t, inst, "destroyed")
	if err := b.Destroy(ctx, id); err != nil {
		t.Errorf("Destroy again: %v (Destroy is idempotent)", err)
	}
	wantKind(t, "Pause of a destroyed sandbox", b.Pause(ctx, id), sandbox.KindNotFound)
	if inst, err := b.Resume(ctx, id, s.opts.Spec); err == nil {
		t.Errorf("Resume of a destroyed sandbox: got %v, no error", inst)
	}
	if b.Supports(sandbox.CapMeter) {
		_, err := b.CPUTime(id)
		wantErr(t, "CPUTime of a destroyed sandbox", err)
	}
}

// attach: a live sandbox is found again by Attach (on a reopened backend
// where the caller gives one) and answers there; once destroyed, Attach
// fails.
func (s *suite) attach(t *testing.T, b *sandbox.Adapter) {
	ctx := t.Context()
	id := newID()
	s.start(t, b, id)
	again := b
	if s.opts.Reopen != nil {
		again = sandbox.Adapt(s.opts.Reopen(t, b.Unwrap()))
		t.Cleanup(func() { again.Destroy(context.Background(), id) })
	}
	inst, err := again.Attach(ctx, id, s.opts.Spec)
	if err != nil {
		t.Fatalf("Attach of a live sandbox: %v", err)
	}
	s.answers(t, inst, "attached")
	if err := again.Destroy(ctx, id); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	s.stopped(t, inst, "destroyed after Attach")
	if inst, err := again.Attach(ctx, id, s.opts.Spec); err == nil {
		t.Errorf("Attach of a destroyed sandbox: got %v, no error", inst)
	}
}

// sweep: Sweep asks keep about every sandbox it holds, leaves the kept
// ones running, and destroys the rest.
func (s *suite) sweep(t *testing.T, b *sandbox.Adapter) {
	ctx := t.Context()
	id := newID()
	inst := s.start(t, b, id)
	asked := false
	if err := b.Sweep(ctx, func(got string) bool {
		asked = asked || got == id
		return true
	}); err != nil {
		t.Fatalf("Sweep keeping all: %v", err)
	}
	if !asked {
		t.Errorf("Sweep did not ask about %s", id)
	}
	s.answers(t, inst, "kept by Sweep")
	if err := b.Sweep(ctx, func(string) bool { return false }); err != nil {
		t.Fatalf("Sweep keeping none: %v", err)
	}
	s.stopped(t, inst, "swept")
	wantKind(t, "Pause of a swept sandbox", b.Pause(ctx, id), sandbox.KindNotFound)
	asked = false
	if err := b.Sweep(ctx, func(got string) bool {
		asked = asked || got == id
		return false
	}); err != nil {
		t.Errorf("Sweep after a sweep: %v", err)
	}
	if asked {
		t.Errorf("Sweep still finds %s after it was swept", id)
	}
}

// startTwice: a Start of an id that runs fails. (What becomes of the
// running sandbox differs today: the microVM backend keeps it, gVisor's
// rollback destroys it; so the suite does not pin it.)
func (s *suite) startTwice(t *testing.T, b *sandbox.Adapter) {
	id := newID()
	s.start(t, b, id)
	if inst, err := b.Start(t.Context(), id, s.opts.Spec); err == nil {
		t.Errorf("a second Start of %s: got %v, no error", id, inst)
	}
}

// pauseResume: Pause ends the instance and keeps the sandbox for Resume,
// which brings it back with its files; a paused sandbox cannot be paused
// (not_found: nothing runs), frozen, attached nor resumed twice, a Sweep
// that keeps all leaves it resumable, a shared checkpoint is resumed only
// with its own digest, and a paused sandbox that is destroyed cannot be
// resumed.
func (s *suite) pauseResume(t *testing.T, b *sandbox.Adapter) {
	ctx := t.Context()
	id := newID()
	inst := s.start(t, b, id)
	if s.opts.Shell != nil {
		if _, err := s.opts.Shell(ctx, inst, "echo kept > /tmp/backendtest"); err != nil {
			t.Fatalf("writing a file: %v", err)
		}
	}
	begun := time.Now()
	if err := b.Pause(ctx, id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	t.Logf("Pause took %v", time.Since(begun).Round(time.Millisecond))
	s.stopped(t, inst, "paused")
	wantKind(t, "Pause of a paused sandbox", b.Pause(ctx, id), sandbox.KindNotFound)
	if b.Supports(sandbox.CapMeter) {
		_, err := b.CPUTime(id)
		wantErr(t, "CPUTime of a paused sandbox", err)
	}
	if b.Supports(sandbox.CapFreeze) {
		wantErr(t, "Freeze of a paused sandbox", b.Freeze(ctx, id))
	}
	if inst, err := b.Attach(ctx, id, s.opts.Spec); err == nil {
		t.Errorf("Attach of a paused sandbox: got %v, no error", inst)
	}
	// Whether Sweep asks about a paused sandbox depends on where its
	// checkpoint is (a shared one is no node's: no sweep sees it); kept,
	// it stays resumable.
	if err := b.Sweep(ctx, func(string) bool { return true }); err != nil {
		t.Fatalf("Sweep keeping all: %v", err)
	}
	var resumed sandbox.Instance
	var err error
	begun = time.Now()
	if b.Supports(sandbox.CapDigest) {
		// Without shared checkpoints a backend may keep no digest (""):
		// what it gives must let its own checkpoint through, and where
		// it gives one, another is refused and the sandbox stays paused.
		digest := b.CheckpointDigest(id)
		t.Logf("checkpoint digest %q", digest)
		if digest != "" {
			const other = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
			if inst, err := b.ResumeDigest(ctx, id, s.opts.Spec, other); err == nil {
				t.Fatalf("ResumeDigest with another digest: got %v, no refusal", inst)
			}
			wantKind(t, "Pause after a refused ResumeDigest", b.Pause(ctx, id), sandbox.KindNotFound)
		}
		resumed, err = b.ResumeDigest(ctx, id, s.opts.Spec, digest)
	} else {
		resumed, err = b.Resume(ctx, id, s.opts.Spec)
	}
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	t.Logf("Resume took %v", time.Since(begun).Round(time.Millisecond))
	s.answers(t, resumed, "resumed")
	if s.opts.Shell != nil {
		if got, err := s.opts.Shell(ctx, resumed, "cat /tmp/backendtest"); err != nil || got != "kept" {
			t.Errorf("a file written before the pause: got %q, %v; want kept", got, err)
		}
	}
	if err := b.Pause(ctx, id); err != nil {
		t.Fatalf("Pause after a resume: %v", err)
	}
	s.stopped(t, resumed, "paused again")
	if err := b.Destroy(ctx, id); err != nil {
		t.Fatalf("Destroy of a paused sandbox: %v", err)
	}
	if inst, err := b.Resume(ctx, id, s.opts.Spec); err == nil {
		t.Errorf("Resume of a destroyed paused sandbox: got %v, no error", inst)
	}
	if inst, err := b.Attach(ctx, id, s.opts.Spec); err == nil {
		t.Errorf("Attach of a destroyed paused sandbox: got %v, no error", inst)
	}
}

// warm: a sandbox StartWarm booted answers, Claim takes it, and a claim of
// a destroyed sandbox fails.
func (s *suite) warm(t *testing.T, b *sandbox.Adapter) {
	if !b.Supports(sandbox.CapWarm) {
		t.Skipf("%s is no sandbox.Warmer", b.Name())
	}
	ctx := t.Context()
	id := newID()
	t.Cleanup(func() { b.Destroy(context.Background(), id) })
	inst, err := b.StartWarm(ctx, id, s.opts.Spec)
	if err != nil {
		t.Fatalf("StartWarm: %v", err)
	}
	s.answers(t, inst, "started warm")
	if err := b.Claim(ctx, id); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	s.answers(t, inst, "claimed")
	if err := b.Destroy(ctx, id); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	s.stopped(t, inst, "destroyed")
	wantErr(t, "Claim of a destroyed sandbox", b.Claim(ctx, id))
}

// network: a Networked backend's sandbox has an address on the host's
// side while it runs, can be taken off the network and put back, and has
// none once destroyed.
func (s *suite) network(t *testing.T, b *sandbox.Adapter) {
	if !b.Supports(sandbox.CapNetwork) {
		t.Skipf("%s is no sandbox.Networked", b.Name())
	}
	ctx := t.Context()
	id := newID()
	inst := s.start(t, b, id)
	addr, ok := b.SandboxAddr(id)
	if !ok || !addr.IsValid() {
		t.Fatalf("SandboxAddr of a live sandbox: got %v, %v", addr, ok)
	}
	for _, online := range []bool{true, false, true} {
		if err := b.SetOnline(id, online); err != nil {
			t.Fatalf("SetOnline(%v): %v", online, err)
		}
	}
	s.answers(t, inst, "online")
	if err := b.Destroy(ctx, id); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	s.stopped(t, inst, "destroyed")
	if a, ok := b.SandboxAddr(id); ok {
		t.Errorf("SandboxAddr of a destroyed sandbox: got %v", a)
	}
	wantErr(t, "SetOnline of a destroyed sandbox", b.SetOnline(id, false))
}
