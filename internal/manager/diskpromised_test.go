package manager

import "testing"

// TestDiskPromised: what the live sandboxes' disk quotas hold of the
// free space, as admission weighs them (over the overcommit ratio), for
// the template library to leave free.
func TestDiskPromised(t *testing.T) {
	m := &Manager{cfg: Config{HostCPUs: 64, HostMemoryMiB: 1 << 20, Overcommit: 2,
		DiskFree: func() (int64, error) { return 100 << 30, nil }}, live: map[string]*entry{}}
	m.cfg.setDefaults()
	if got := m.DiskPromised(); got != 0 {
		t.Fatalf("no sandbox: got %d, want 0", got)
	}
	a, b := &entry{id: "a"}, &entry{id: "b"}
	if err := m.admit(a, tenant{account: "x"}, size(1, 512, 10240)); err != nil {
		t.Fatal(err)
	}
	if err := m.admit(b, tenant{account: "y"}, size(1, 512, 2048)); err != nil {
		t.Fatal(err)
	}
	if got, want := m.DiskPromised(), int64(12288)<<20/2; got != want {
		t.Fatalf("two sandboxes of 10 and 2 GiB at overcommit 2: got %d, want %d", got, want)
	}
	m.release(a)
	if got, want := m.DiskPromised(), int64(2048)<<20/2; got != want {
		t.Fatalf("after a release: got %d, want %d", got, want)
	}
}
