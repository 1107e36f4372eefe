package manager

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// fakeBackend is a sandbox.Backend in memory, for the manager's unit tier
// only: it lets the lifecycle suite drive state changes, failures, CPU time
// and interleavings that a real sandbox cannot be made to show on demand,
// in milliseconds. It is no evidence about isolation or the real backend's
// behaviour; those are exercised against gVisor by test/conformance and
// test/e2e (lifecycle_race_test.go for the races here).
//
// Where it matters it behaves as the gVisor backend does: Resume of a
// sandbox that is not paused fails and leaves it as it is, a Resume whose
// restore fails (fail) kills what runs under the id; Pause and Destroy
// stop the instance, so its Done fires. What
// every backend must do, the fake included, is pinned by the suite in
// internal/sandbox/backendtest (TestFakeBackendSuite).
type fakeBackend struct {
	mu        sync.Mutex
	boxes     map[string]*fakeBox
	destroyed map[string]int // Destroy calls that found a running or paused box
	calls     map[string]int // "start", "pause", "resume", "destroy" -> count
	cpu       map[string]time.Duration
	warm      map[string]bool // started warm and not claimed yet
	frozen    map[string]bool // frozen (sandbox.Freezer) and not thawed
	// inflight and peak count the calls of each op under way at once, and
	// the most there were.
	inflight, peak map[string]int
	// delay is how long Start, Pause and Resume take: it widens the
	// windows in which unserialized calls would overlap.
	delay time.Duration
	// fail, when it returns an error for an operation and id, makes that
	// call fail.
	fail func(op, id string) error
	// agent, when set, answers the instances' agent connections (a fake
	// agent); without it a dial finds a connection that closes at once.
	agent http.Handler
}

type fakeBox struct {
	state sandbox.State // running or paused
	inst  *fakeInstance
	// digest is what the last pause's checkpoint digests to; pauses
	// counts them, so each checkpoint's differs.
	digest string
	pauses int
	// from is what the snapshot it started from said (fakesnapshot_test.go).
	from string
}

type fakeInstance struct {
	agent  http.Handler
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	reason sandbox.EndReason
	msg    string
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{boxes: map[string]*fakeBox{}, destroyed: map[string]int{}, calls: map[string]int{}, cpu: map[string]time.Duration{}, warm: map[string]bool{}, frozen: map[string]bool{}, inflight: map[string]int{}, peak: map[string]int{}}
}

func newFakeInstance() *fakeInstance { return &fakeInstance{done: make(chan struct{})} }

func (i *fakeInstance) DialAgent(ctx context.Context) (net.Conn, error) {
	c, s := net.Pipe()
	if i.agent == nil {
		go s.Close()
		return c, nil
	}
	go (&http.Server{Handler: i.agent}).Serve(&oneConn{conn: s})
	return c, nil
}

// oneConn is a listener of one connection, which it hands out once.
type oneConn struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c, l.done = l.conn, make(chan struct{}) })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.conn.LocalAddr() }

func (i *fakeInstance) Done() <-chan struct{} { return i.done }

func (i *fakeInstance) Cause() (sandbox.EndReason, string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.reason, i.msg
}

// stop ends the instance as a dying sandbox would.
func (i *fakeInstance) stop(reason sandbox.EndReason, msg string) {
	i.once.Do(func() {
		i.mu.Lock()
		i.reason, i.msg = reason, msg
		i.mu.Unlock()
		close(i.done)
	})
}

func (b *fakeBackend) Name() string { return "fake" }

// begin counts a call, waits the delay and says whether it must fail.
func (b *fakeBackend) begin(op, id string) error {
	b.mu.Lock()
	b.calls[op]++
	b.inflight[op]++
	b.peak[op] = max(b.peak[op], b.inflight[op])
	fail := b.fail
	b.mu.Unlock()
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	b.mu.Lock()
	b.inflight[op]--
	b.mu.Unlock()
	if fail != nil {
		return fail(op, id)
	}
	return nil
}

func (b *fakeBackend) Start(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	if err := b.begin("start", id); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// As the real backends do, a second start of an id that runs fails
	// (backendtest's StartTwice).
	if box := b.boxes[id]; box != nil && box.state == sandbox.StateRunning {
		return nil, fmt.Errorf("sandbox %s runs already", id)
	}
	box := &fakeBox{state: sandbox.StateRunning, inst: newFakeInstance()}
	box.inst.agent = b.agent
	b.boxes[id] = box
	return box.inst, nil
}

func (b *fakeBackend) Attach(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if box := b.boxes[id]; box != nil && box.state == sandbox.StateRunning {
		return box.inst, nil
	}
	return nil, fmt.Errorf("sandbox %s is not running", id)
}

func (b *fakeBackend) Pause(ctx context.Context, id string) error {
	if err := b.begin("pause", id); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	box := b.boxes[id]
	if box == nil || box.state != sandbox.StateRunning {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s is not running here", id)
	}
	box.state = sandbox.StatePaused
	box.pauses++
	box.digest = fmt.Sprintf("sha256:%s-%d", id, box.pauses)
	box.inst.stop(sandbox.EndError, "checkpointed")
	box.inst = nil
	delete(b.cpu, id)
	return nil
}

func (b *fakeBackend) Resume(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	err := b.begin("resume", id)
	b.mu.Lock()
	defer b.mu.Unlock()
	box := b.boxes[id]
	if err == nil && (box == nil || box.state != sandbox.StatePaused) {
		// As gVisor's Resume finds no checkpoint: it fails before it
		// restores anything, and what runs under the id runs on.
		return nil, fmt.Errorf("no checkpoint for %s", id)
	}
	if err != nil {
		// As gVisor's Resume does when a restore fails: stop the
		// container of id, whoever started it.
		if box != nil && box.state == sandbox.StateRunning {
			box.inst.stop(sandbox.EndError, "killed by a failed resume")
			delete(b.boxes, id)
		}
		return nil, err
	}
	box.state, box.inst = sandbox.StateRunning, newFakeInstance()
	box.inst.agent = b.agent
	return box.inst, nil
}

// CheckpointDigest implements sandbox.CheckpointDigester.
func (b *fakeBackend) CheckpointDigest(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if box := b.boxes[id]; box != nil && box.state == sandbox.StatePaused {
		return box.digest
	}
	return ""
}

// ResumeDigest implements sandbox.CheckpointDigester.
func (b *fakeBackend) ResumeDigest(ctx context.Context, id string, spec sandbox.Spec, digest string) (sandbox.Instance, error) {
	b.mu.Lock()
	box := b.boxes[id]
	changed := digest != "" && box != nil && box.state == sandbox.StatePaused && box.digest != digest
	b.mu.Unlock()
	if changed {
		return nil, fmt.Errorf("the checkpoint of %s is not the one its pause saved", id)
	}
	return b.Resume(ctx, id, spec)
}

// tamper changes a paused box's checkpoint, as a write to the shared
// storage by someone else would.
func (b *fakeBackend) tamper(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if box := b.boxes[id]; box != nil {
		box.digest += "-changed"
	}
}

func (b *fakeBackend) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls["destroy"]++
	if box := b.boxes[id]; box != nil {
		b.destroyed[id]++
		if box.inst != nil {
			box.inst.stop(sandbox.EndError, "destroyed")
		}
		delete(b.boxes, id)
	}
	delete(b.frozen, id)
	return nil
}

// Freeze implements sandbox.Freezer.
func (b *fakeBackend) Freeze(ctx context.Context, id string) error {
	if err := b.begin("freeze", id); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if box := b.boxes[id]; box == nil || box.state != sandbox.StateRunning {
		return fmt.Errorf("sandbox %s is not running", id)
	}
	b.frozen[id] = true
	return nil
}

// Thaw implements sandbox.Freezer.
func (b *fakeBackend) Thaw(ctx context.Context, id string) error {
	if err := b.begin("thaw", id); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.frozen[id] {
		return fmt.Errorf("sandbox %s is not frozen", id)
	}
	delete(b.frozen, id)
	return nil
}

// isFrozen reports whether a box is frozen.
func (b *fakeBackend) isFrozen(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.frozen[id]
}

// Sweep destroys every box that keep refuses, as the gVisor backend
// removes what no record claims.
func (b *fakeBackend) Sweep(ctx context.Context, keep func(id string) bool) error {
	b.mu.Lock()
	var gone []string
	for id := range b.boxes {
		if !keep(id) {
			gone = append(gone, id)
		}
	}
	b.mu.Unlock()
	for _, id := range gone {
		b.Destroy(ctx, id)
	}
	return nil
}

// StartWarm implements sandbox.Warmer: a start the fake remembers as
// warm, at the lowest priority until Claim.
func (b *fakeBackend) StartWarm(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	inst, err := b.Start(ctx, id, spec)
	if err == nil {
		b.mu.Lock()
		b.warm[id] = true
		b.mu.Unlock()
	}
	return inst, err
}

// Claim implements sandbox.Warmer.
func (b *fakeBackend) Claim(ctx context.Context, id string) error {
	if err := b.begin("claim", id); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.boxes[id] == nil {
		return fmt.Errorf("sandbox %s is gone", id)
	}
	b.warm[id] = false
	return nil
}

// lowPriority reports whether a box runs at the warm priority still.
func (b *fakeBackend) lowPriority(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.warm[id]
}

// ids lists the boxes the backend holds.
func (b *fakeBackend) ids() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for id := range b.boxes {
		out = append(out, id)
	}
	return out
}

// CPUTime implements sandbox.Meter.
func (b *fakeBackend) CPUTime(id string) (time.Duration, error) {
	b.mu.Lock()
	fail := b.fail
	b.mu.Unlock()
	if fail != nil {
		if err := fail("cputime", id); err != nil {
			return 0, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if box := b.boxes[id]; box == nil || box.state != sandbox.StateRunning {
		return 0, fmt.Errorf("sandbox %s is not running", id)
	}
	return b.cpu[id], nil
}

func (b *fakeBackend) setCPU(id string, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cpu[id] = d
}

// state is the box's state on the backend: running, paused, or "" when
// there is none.
func (b *fakeBackend) state(id string) sandbox.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	if box := b.boxes[id]; box != nil {
		return box.state
	}
	return ""
}

// crash makes a running sandbox die by itself.
func (b *fakeBackend) crash(id string, reason sandbox.EndReason) {
	b.mu.Lock()
	box := b.boxes[id]
	b.mu.Unlock()
	if box != nil && box.inst != nil {
		box.inst.stop(reason, "crashed")
	}
}

func (b *fakeBackend) count(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[op]
}

// peakOf is the most calls of op that were under way at once.
func (b *fakeBackend) peakOf(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak[op]
}

func (b *fakeBackend) destroys(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.destroyed[id]
}
