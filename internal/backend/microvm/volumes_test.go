package microvm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestVolumes boots one microVM with a writable and a read-only volume
// (host directories here; internal/volume's images in test/e2e): the
// guest reads what the host wrote and the host what the guest wrote; the
// guest's root can neither write the read-only one, not even by
// remounting it, nor make a device node; Destroy ends each virtiofsd,
// unmounts the read-only view and leaves the volumes' files where they
// are.
func TestVolumes(t *testing.T) {
	b := newTestBackend(t)
	rw, ro := t.TempDir(), t.TempDir()
	// As internal/volume makes them: the root is the sandbox user's.
	for _, d := range []string{rw, ro} {
		if err := os.Chown(d, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rw, "from-host"), []byte("host-wrote-this"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "kept"), []byte("read-only-content"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := testSpec()
	spec.Volumes = []sandbox.VolumeMount{
		{ID: "vol_00000000000000a1", Name: "data", Path: "/data", HostDir: rw},
		{ID: "vol_00000000000000a2", Name: "refs", Path: "/mnt/refs", ReadOnly: true, HostDir: ro},
	}
	const id = "sbx_vmvolumes01"
	t.Cleanup(func() { b.Destroy(t.Context(), id) })
	inst, err := b.Start(t.Context(), id, spec)
	if err != nil {
		t.Fatal(err)
	}
	hc := agentClient(inst)

	if got := agentSh(t, hc, "cat /data/from-host"); got != "host-wrote-this" {
		t.Errorf("the guest read %q from the writable volume", got)
	}
	if out := agentSh(t, hc, "echo guest-wrote-this > /data/from-guest && mkdir -p /data/d/e && echo deep > /data/d/e/f 2>&1"); out != "" {
		t.Errorf("writing: %q", out)
	}
	for name, want := range map[string]string{"from-guest": "guest-wrote-this\n", "d/e/f": "deep\n"} {
		if b, err := os.ReadFile(filepath.Join(rw, name)); err != nil || string(b) != want {
			t.Errorf("host read %s: %q, %v", name, b, err)
		}
	}
	if got := agentSh(t, hc, "cat /mnt/refs/kept"); got != "read-only-content" {
		t.Errorf("the guest read %q from the read-only volume", got)
	}
	got := agentSh(t, hc, "echo x > /mnt/refs/new 2>/dev/null && echo wrote; sudo mount -o remount,rw /mnt/refs 2>/dev/null; sudo sh -c 'echo y > /mnt/refs/new2' 2>/dev/null && echo wrote-after-remount; sudo rm -f /mnt/refs/kept 2>/dev/null && echo removed; echo done")
	if got != "done" {
		t.Errorf("the guest's root changed the read-only volume: %q", got)
	}
	for _, name := range []string{"new", "new2"} {
		if _, err := os.Lstat(filepath.Join(ro, name)); err == nil {
			t.Errorf("%s appeared in the read-only volume on the host", name)
		}
	}
	if _, err := os.Stat(filepath.Join(ro, "kept")); err != nil {
		t.Errorf("the read-only volume's file: %v", err)
	}
	if got := agentSh(t, hc, "sudo mknod /data/null c 1 3 2>/dev/null && echo made; echo done"); got != "done" {
		t.Errorf("the guest made a device node in a volume: %q", got)
	}
	// The share is the volume's directory and nothing above it.
	if got := agentSh(t, hc, "ls -a /data/.. | grep -c "+filepath.Base(rw)+"; ls /data/../.. >/dev/null; echo ok"); !strings.HasSuffix(got, "ok") || strings.HasPrefix(got, "1") {
		t.Errorf("the guest saw above its volume: %q", got)
	}

	views := volumeView(b.paths(id), 1)
	if !mounted(views) {
		t.Errorf("the read-only view %s is not mounted while the sandbox runs", views)
	}
	for _, source := range []string{rw, views} {
		if virtiofsds(t, source) == 0 {
			t.Errorf("no virtiofsd serves %s", source)
		}
	}
	if err := b.Destroy(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if n := virtiofsds(t, rw) + virtiofsds(t, views); n != 0 {
		t.Errorf("%d virtiofsd left after Destroy", n)
	}
	if mounted(views) {
		t.Errorf("the read-only view is still mounted after Destroy")
	}
	for dir, name := range map[string]string{rw: "from-guest", ro: "kept"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("after Destroy the volume lost %s: %v", name, err)
		}
	}
}

// virtiofsds counts the processes serving source (the namespaced child
// counts with its parent: both name it).
func virtiofsds(t *testing.T, source string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && args[0] == virtiofsd && strings.Contains(string(cmdline), "source="+source+"\x00") {
			n++
		}
	}
	return n
}
