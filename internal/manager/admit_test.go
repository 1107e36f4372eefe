package manager

import (
	"errors"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

func size(vcpus, memoryMiB, diskMiB int) sandbox.Spec {
	return sandbox.Spec{VCPUs: vcpus, MemoryMiB: memoryMiB, DiskMiB: diskMiB}
}

func TestAdmission(t *testing.T) {
	m := &Manager{cfg: Config{HostCPUs: 2, HostMemoryMiB: 8192, Overcommit: 1}, live: map[string]*entry{}}
	m.cfg.setDefaults()
	a, b, c := &entry{id: "a"}, &entry{id: "b"}, &entry{id: "c"}
	if err := m.admit(a, tenant{account: "x"}, size(1, 4096, 0)); err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := m.admit(b, tenant{account: "y"}, size(1, 4096, 0)); err != nil {
		t.Fatalf("second: %v", err)
	}
	if err := m.admit(c, tenant{account: "x"}, size(1, 512, 0)); sandbox.KindOf(err) != sandbox.KindCapacityExhausted {
		t.Fatalf("third: got %v, want capacity_exhausted", err)
	}
	m.release(a)
	if err := m.admit(c, tenant{account: "x"}, size(1, 512, 0)); err != nil {
		t.Fatalf("after a release: got %v, want admitted", err)
	}
}

// TestDiskAdmission: the live sandboxes' disk quotas must fit the data
// dir's free space times the overcommit ratio.
func TestDiskAdmission(t *testing.T) {
	const gib = 1 << 30
	free := int64(25 * gib)
	var freeErr error
	m := &Manager{cfg: Config{HostCPUs: 64, HostMemoryMiB: 1 << 20, Overcommit: 2,
		DiskFree: func() (int64, error) { return free, freeErr }}, live: map[string]*entry{}}
	m.cfg.setDefaults()
	// 25 GiB free x 2 = 50 GiB of quotas: five of 10 GiB, not six.
	var es []*entry
	for i := range 5 {
		e := &entry{id: string(rune('a' + i))}
		if err := m.admit(e, tenant{account: "x"}, size(1, 512, 10240)); err != nil {
			t.Fatalf("sandbox %d: got %v, want admitted", i+1, err)
		}
		es = append(es, e)
	}
	sixth := &entry{id: "f"}
	err := m.admit(sixth, tenant{account: "x"}, size(1, 512, 10240))
	if got, want := sandbox.KindOf(err), sandbox.KindCapacityExhausted; got != want {
		t.Fatalf("sixth: got %v (kind %s), want %s", err, got, want)
	}
	if msg := sandbox.MessageOf(err); !strings.Contains(msg, "disk") || !strings.Contains(msg, "51200 MiB") {
		t.Errorf("message %q does not say the disk is full and what it holds", msg)
	}
	// A smaller quota still fits in what is left.
	if err := m.admit(sixth, tenant{account: "x"}, size(1, 512, 0)); err != nil {
		t.Errorf("a sandbox with no disk quota: got %v, want admitted", err)
	}
	m.release(sixth)
	m.release(es[0])
	if err := m.admit(sixth, tenant{account: "x"}, size(1, 512, 10240)); err != nil {
		t.Errorf("after a release: got %v, want admitted", err)
	}
	// Free space is read at each admission: a fuller disk admits less.
	free = 0
	if err := m.admit(&entry{id: "g"}, tenant{account: "x"}, size(1, 512, 1)); sandbox.KindOf(err) != sandbox.KindCapacityExhausted {
		t.Errorf("with no free space: got %v, want capacity_exhausted", err)
	}
	freeErr = errors.New("statfs broke")
	if err := m.admit(&entry{id: "g"}, tenant{account: "x"}, size(1, 512, 1)); sandbox.KindOf(err) != sandbox.KindInternal {
		t.Errorf("with unreadable free space: got %v, want internal", err)
	}
}

func TestStatfsFree(t *testing.T) {
	free, err := statfsFree(t.TempDir())
	if err != nil || free <= 0 {
		t.Fatalf("got %d, %v; want a positive byte count", free, err)
	}
	if _, err := statfsFree("/nonexistent/withruntime"); err == nil {
		t.Error("a missing dir: got nil error, want one")
	}
}
