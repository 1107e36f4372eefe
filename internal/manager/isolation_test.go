package manager

import (
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// namedFake is the fake backend under an isolation's name.
type namedFake struct {
	*fakeBackend
	name string
}

func (b namedFake) Name() string { return b.name }

// isoRig is a rig whose backend is a sandbox.Multi of two fakes: gvisor
// (the default, the rig's r.be) and microvm (vm).
func isoRig(t *testing.T, config func(*Config)) (r *rig, vm *fakeBackend) {
	t.Helper()
	vm = newFakeBackend()
	r = newRig(t, func(c *Config) {
		multi, err := sandbox.NewMulti(sandbox.IsolationGVisor,
			namedFake{c.Backend.(*fakeBackend), sandbox.IsolationGVisor},
			namedFake{vm, sandbox.IsolationMicroVM})
		if err != nil {
			t.Fatal(err)
		}
		c.Backend = multi
		if config != nil {
			config(c)
		}
	})
	return r, vm
}

func TestIsolationChoice(t *testing.T) {
	r, vm := isoRig(t, nil)
	def := r.create(service.CreateRequest{})
	if def.Spec.Isolation != sandbox.IsolationGVisor || def.Backend != sandbox.IsolationGVisor {
		t.Errorf("default create: got isolation %q backend %q, want both %q", def.Spec.Isolation, def.Backend, sandbox.IsolationGVisor)
	}
	if got := r.record(def.ID).Spec.Isolation; got != sandbox.IsolationGVisor {
		t.Errorf("stored default isolation: got %q, want %q", got, sandbox.IsolationGVisor)
	}
	rec := r.create(service.CreateRequest{Isolation: sandbox.IsolationMicroVM})
	if got := r.record(rec.ID); got.Spec.Isolation != sandbox.IsolationMicroVM || got.Backend != sandbox.IsolationMicroVM {
		t.Errorf("microvm create: stored isolation %q backend %q, want both %q", got.Spec.Isolation, got.Backend, sandbox.IsolationMicroVM)
	}
	ctx := t.Context()
	if _, err := r.m.Pause(ctx, "acct", rec.ID); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if _, err := r.m.Resume(ctx, "acct", rec.ID); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if _, err := r.m.Stop(ctx, "acct", rec.ID); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, op := range []string{"start", "pause", "resume"} {
		if got := vm.calls[op]; got != 1 {
			t.Errorf("microvm %s calls: got %d, want 1", op, got)
		}
		if got, want := r.be.calls[op], map[string]int{"start": 1}[op]; got != want {
			t.Errorf("gvisor %s calls: got %d, want %d", op, got, want)
		}
	}
	if got := vm.state(rec.ID); got != "" {
		t.Errorf("the stopped microvm sandbox is still %q on its backend", got)
	}
	if got := r.be.state(def.ID); got != sandbox.StateRunning {
		t.Errorf("the gvisor sandbox: got %q, want running", got)
	}
}

func TestIsolationRefused(t *testing.T) {
	r, _ := isoRig(t, nil)
	_, err := r.m.Create(t.Context(), "acct", "", service.CreateRequest{Isolation: "firecracker"})
	if got := sandbox.KindOf(err); got != sandbox.KindInvalid {
		t.Fatalf("unknown isolation: got %v, want kind %s", err, sandbox.KindInvalid)
	}
	if msg := sandbox.MessageOf(err); !strings.Contains(msg, `"gvisor"`) || !strings.Contains(msg, `"microvm"`) {
		t.Errorf("unknown isolation's message %q does not name the allowed values", msg)
	}

	plain := newRig(t, func(c *Config) { c.Backend = namedFake{newFakeBackend(), sandbox.IsolationGVisor} })
	_, err = plain.m.Create(t.Context(), "acct", "", service.CreateRequest{Isolation: sandbox.IsolationMicroVM})
	if got := sandbox.KindOf(err); got != sandbox.KindNotSupported {
		t.Fatalf("an isolation the server does not run: got %v, want kind %s", err, sandbox.KindNotSupported)
	}
	if rec := plain.create(service.CreateRequest{Isolation: sandbox.IsolationGVisor}); rec.Spec.Isolation != sandbox.IsolationGVisor {
		t.Errorf("gvisor on a gvisor-only server: got %q", rec.Spec.Isolation)
	}
}

// Pools hold the default isolation: a create of the other one never takes
// a member.
func TestIsolationPools(t *testing.T) {
	r, vm := isoRig(t, func(c *Config) { c.Pools = []Pool{{VCPUs: 2, MemoryMiB: 4096, Size: 1}} })
	if err := r.m.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.waitPool(defaultKey, 1)
	warm := r.members(defaultKey)
	rec := r.create(service.CreateRequest{Isolation: sandbox.IsolationMicroVM})
	if warm[rec.ID] || vm.state(rec.ID) != sandbox.StateRunning {
		t.Errorf("a microvm create took gvisor pool member %s (microvm state %q)", rec.ID, vm.state(rec.ID))
	}
	if vm.calls["start"] != 1 {
		t.Errorf("microvm starts: got %d, want 1 (pools are of the default isolation)", vm.calls["start"])
	}
	rec = r.create(service.CreateRequest{Isolation: sandbox.IsolationGVisor})
	if !warm[rec.ID] {
		t.Errorf("a gvisor create started cold with a member ready")
	}
	if rec.Spec.Isolation != sandbox.IsolationGVisor {
		t.Errorf("claimed member's isolation: got %q, want %q", rec.Spec.Isolation, sandbox.IsolationGVisor)
	}
}

// A record from before specs named an isolation is reattached on the
// backend its Backend names, not on the server's default.
func TestIsolationOfOldRecords(t *testing.T) {
	r, vm := isoRig(t, nil)
	rec := r.create(service.CreateRequest{Isolation: sandbox.IsolationMicroVM})
	old := r.record(rec.ID)
	old.Spec.Isolation = ""
	if err := r.st.Bolt.PutSandbox(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	multi, err := sandbox.NewMulti(sandbox.IsolationGVisor,
		namedFake{r.be, sandbox.IsolationGVisor}, namedFake{vm, sandbox.IsolationMicroVM})
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.m.cfg
	cfg.Backend = multi
	m2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if err := m2.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := r.record(rec.ID); got.State != sandbox.StateRunning {
		t.Errorf("old microvm record after a restart: got %s (%s), want running", got.State, got.EndMessage)
	}
}

// TestVolumesOnBothTiers: volumes mount on gVisor and on microVMs and
// are carried into the record. A microVM with volumes cannot be saved
// (vhost-user-fs does not migrate): a create that would need a pause (on
// the lease's end, auto-resume) is not_supported and boots nothing; a
// pause is not_supported and leaves it running, its backend untouched.
func TestVolumesOnBothTiers(t *testing.T) {
	r, vm := isoRig(t, nil)
	mounts := []sandbox.VolumeMount{{ID: "vol_0123456789abcdef", Name: "data", Path: "/data", HostDir: "/run/x/vol_0123456789abcdef"}}
	rec := r.create(service.CreateRequest{Volumes: mounts})
	if got := r.record(rec.ID).Spec.Volumes; len(got) != 1 || got[0] != mounts[0] {
		t.Fatalf("stored volumes: %+v", got)
	}
	calls := func(op string) int {
		vm.mu.Lock()
		defer vm.mu.Unlock()
		return vm.calls[op]
	}
	vmRec := r.create(service.CreateRequest{Isolation: sandbox.IsolationMicroVM, Volumes: mounts})
	if got := r.record(vmRec.ID).Spec.Volumes; len(got) != 1 || got[0] != mounts[0] {
		t.Fatalf("microVM's stored volumes: %+v", got)
	}
	before := calls("start")
	for name, req := range map[string]service.CreateRequest{
		"on_lease_end pause": {Isolation: sandbox.IsolationMicroVM, Volumes: mounts, OnLeaseEnd: sandbox.OnLeaseEndPause},
		"auto_resume":        {Isolation: sandbox.IsolationMicroVM, Volumes: mounts, AutoResume: true},
	} {
		_, err := r.m.Create(t.Context(), "acct", "", req)
		if sandbox.KindOf(err) != sandbox.KindNotSupported || !strings.Contains(err.Error(), "paused") {
			t.Errorf("microVM with volumes and %s: %v, want not_supported saying it cannot be paused", name, err)
		}
	}
	if calls("start") != before {
		t.Fatal("a microVM booted for a refused create")
	}
	_, err := r.m.Pause(t.Context(), "acct", vmRec.ID)
	if sandbox.KindOf(err) != sandbox.KindNotSupported {
		t.Fatalf("pausing a microVM with volumes: %v, want not_supported", err)
	}
	if calls("pause") != 0 || r.record(vmRec.ID).State != sandbox.StateRunning {
		t.Fatalf("a refused pause reached the backend (%d) or left state %s", calls("pause"), r.record(vmRec.ID).State)
	}
	// The same with gVisor pauses.
	if _, err := r.m.Pause(t.Context(), "acct", rec.ID); err != nil {
		t.Fatalf("pausing a gVisor sandbox with volumes: %v", err)
	}
}
