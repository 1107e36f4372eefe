package node

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// fakeManager records what the RPC and the lease loop ask of it.
type fakeManager struct {
	mu    sync.Mutex
	calls []string // "create acct key", "stop acct id", "fence", ...
	agent http.RoundTripper
	// err, when set, is every sandbox call's error.
	err error
	// st, when set, is read by DropUnowned and Unfence, as the manager
	// reads records there.
	st store.Store
	// thawed: an Unfence thawed sandboxes that no Fence froze since.
	thawed bool
	// epochs are the node epochs the lease handed over (SetNodeEpoch).
	epochs []int64
}

func (f *fakeManager) SetNodeEpoch(epoch int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epochs = append(f.epochs, epoch)
}

func (f *fakeManager) Epochs() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.epochs...)
}

func (f *fakeManager) Thawed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.thawed
}

// read reads a record as the manager's checks do; a missing one is fine.
func (f *fakeManager) read(ctx context.Context) error {
	if f.st == nil {
		return nil
	}
	_, err := f.st.GetSandbox(ctx, "sb1")
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return nil
	}
	return err
}

func (f *fakeManager) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeManager) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeManager) rec(id, account string) (*sandbox.Record, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &sandbox.Record{ID: id, Account: account, State: sandbox.StateRunning}, nil
}

func (f *fakeManager) Create(_ context.Context, account, keyID string, req service.CreateRequest) (*sandbox.Record, error) {
	call := "create " + account + " " + keyID + " " + req.Image
	for _, m := range req.Volumes {
		call += " " + m.ID + "@" + m.HostDir
	}
	f.record(call)
	return f.rec("sb1", account)
}

func (f *fakeManager) Extend(_ context.Context, account, id string, d time.Duration) (*sandbox.Record, error) {
	f.record("extend " + account + " " + id + " " + d.String())
	return f.rec(id, account)
}

func (f *fakeManager) SetLease(_ context.Context, account, id string, d time.Duration) (*sandbox.Record, error) {
	f.record("set_lease " + account + " " + id + " " + d.String())
	return f.rec(id, account)
}

func (f *fakeManager) Stop(_ context.Context, account, id string) (*sandbox.Record, error) {
	f.record("stop " + account + " " + id)
	return f.rec(id, account)
}

func (f *fakeManager) Pause(_ context.Context, account, id string) (*sandbox.Record, error) {
	f.record("pause " + account + " " + id)
	return f.rec(id, account)
}

func (f *fakeManager) Resume(_ context.Context, account, id string) (*sandbox.Record, error) {
	f.record("resume " + account + " " + id)
	return f.rec(id, account)
}

func (f *fakeManager) Agent(_ context.Context, account, id string) (http.RoundTripper, error) {
	f.record("agent " + account + " " + id)
	if f.err != nil {
		return nil, f.err
	}
	return f.agent, nil
}

func (f *fakeManager) SetNetwork(_ context.Context, account, id string, n sandbox.Network) (*sandbox.Record, error) {
	f.record("network " + account + " " + id)
	return f.rec(id, account)
}

func (f *fakeManager) Egress(_ context.Context, account, id string) ([]egress.Event, error) {
	f.record("egress " + account + " " + id)
	return nil, f.err
}

func (f *fakeManager) Load() store.NodeLoad {
	return store.NodeLoad{Sandboxes: 1, VCPUs: 2, MemoryMiB: 512}
}

// Fence freezes whatever is thawed, fenced already or not, as the
// manager's does.
func (f *fakeManager) Fence(context.Context) error {
	f.record("fence")
	f.mu.Lock()
	f.thawed = false
	f.mu.Unlock()
	return nil
}

// Unfence thaws as it checks, as the manager's does: cut short, some
// sandboxes are thawed already.
func (f *fakeManager) Unfence(ctx context.Context) error {
	f.record("unfence")
	f.mu.Lock()
	f.thawed = true
	f.mu.Unlock()
	return f.read(ctx)
}

func (f *fakeManager) DropUnowned(ctx context.Context) error {
	f.record("drop")
	return f.read(ctx)
}

func (f *fakeManager) EndAll(_ context.Context, reason sandbox.EndReason) error {
	f.record("endall " + string(reason))
	return nil
}

// fixedState is a State the test sets.
type fixedState struct {
	mu     sync.Mutex
	fenced bool
}

func (s *fixedState) Epoch() int64 { return 7 }

func (s *fixedState) Fenced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced
}

func (s *fixedState) set(f bool) {
	s.mu.Lock()
	s.fenced = f
	s.mu.Unlock()
}

var errNotFound = sandbox.Errorf(sandbox.KindNotFound, "sandbox sb9 not found")
