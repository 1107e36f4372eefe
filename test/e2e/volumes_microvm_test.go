package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestVolumesMicroVM: one volume across both tiers (under TCG). A
// gVisor sandbox writes it while a microVM mounts it read-only: the
// microVM reads the writes (a change within the attribute cache's second)
// and cannot write, not even as root after remounting. Then a microVM
// writes it: its size holds inside (ENOSPC), a link its root left there
// is not followed by the files API, both microVMs' shares work on across
// a kill -9 of the server, the files outlive them, and nothing of them
// stays on the host (QEMU, virtiofsd, views, cgroups). A microVM with
// volumes cannot be saved: its pause, and a create that asks for a pause
// at the lease's end or for auto-resume, are 422.
func TestVolumesMicroVM(t *testing.T) {
	testenv.RequiresMicroVM(t)
	s := testenv.StartServer(t, "--microvm-accel", "tcg")
	ctx := t.Context()
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateVolume(ctx, "shared", 1); err != nil {
		t.Fatal(err)
	}
	var ids []string
	create := func(req api.CreateSandboxRequest) (*api.Sandbox, error) {
		req.VCPUs, req.MemoryMiB = 1, 512
		sb, err := c.CreateSandbox(ctx, req)
		if err == nil {
			ids = append(ids, sb.ID)
			t.Cleanup(func() { c.StopSandbox(context.Background(), sb.ID) })
		}
		return sb, err
	}
	writer, err := create(api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "shared", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, writer.ID, "echo from-gvisor > /data/a.txt")
	reader, err := create(api.CreateSandboxRequest{Isolation: "microvm", Volumes: []api.VolumeMount{{Name: "shared", Path: "/mnt/shared", ReadOnly: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if out := mustExec(t, c, reader.ID, "cat /mnt/shared/a.txt"); out != "from-gvisor\n" {
		t.Fatalf("the microVM reads %q", out)
	}
	mustExec(t, c, writer.ID, "echo changed > /data/a.txt")
	eventually(t, 5*time.Second, "the microVM to see the change", func() bool {
		out, err := execOut(ctx, c, reader.ID, "cat /mnt/shared/a.txt")
		return err == nil && out == "changed\n"
	})
	out, err := execOut(ctx, c, reader.ID, "(echo x > /mnt/shared/ro.txt) 2>&1; sudo mount -o remount,rw /mnt/shared; sudo sh -c 'echo x > /mnt/shared/ro2.txt' 2>&1")
	if err == nil || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("the read-only microVM's write: %q %v, want EROFS", out, err)
	}
	for _, name := range []string{"/ro.txt", "/ro2.txt"} {
		if _, err := c.ReadVolumeFile(ctx, "shared", name); apiCode(err) != "not_found" {
			t.Errorf("%s in the volume after a read-only write: %v", name, err)
		}
	}
	if _, err := c.PauseSandbox(ctx, reader.ID); apiCode(err) != "not_supported" {
		t.Errorf("pausing a microVM with a volume: %v, want not_supported", err)
	}
	for name, req := range map[string]api.CreateSandboxRequest{
		"on_lease_end pause": {Isolation: "microvm", OnLeaseEnd: "pause", Volumes: []api.VolumeMount{{Name: "shared", Path: "/x", ReadOnly: true}}},
		"auto_resume":        {Isolation: "microvm", AutoResume: true, Volumes: []api.VolumeMount{{Name: "shared", Path: "/x", ReadOnly: true}}},
	} {
		if _, err := create(req); apiCode(err) != "not_supported" {
			t.Errorf("a microVM with a volume and %s: %v, want not_supported", name, err)
		}
	}

	// The one writer moves to a microVM.
	if _, err := c.StopSandbox(ctx, writer.ID); err != nil {
		t.Fatal(err)
	}
	vmWriter, err := create(api.CreateSandboxRequest{Isolation: "microvm", Volumes: []api.VolumeMount{{Name: "shared", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, vmWriter.ID, "echo from-microvm > /data/b.txt && ln -s /etc/shadow /data/link && sudo ln -s / /data/rootlink")
	if data, err := c.ReadVolumeFile(ctx, "shared", "/b.txt"); err != nil || string(data) != "from-microvm\n" {
		t.Fatalf("files API read of the microVM's write: %q %v", data, err)
	}
	for _, p := range []string{"/link", "/rootlink/etc/shadow"} {
		if data, err := c.ReadVolumeFile(ctx, "shared", p); err == nil {
			t.Errorf("files API followed the guest's link %s: %q", p, data)
		}
	}
	// The server killed and started again: each virtiofsd went on with
	// its QEMU, outside the server's process group and pipes.
	s.Stop(true)
	s.Start()
	if c, err = client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key)); err != nil {
		t.Fatal(err)
	}
	if out := mustExec(t, c, vmWriter.ID, "cat /data/b.txt && echo after-restart > /data/c.txt"); out != "from-microvm\n" {
		t.Fatalf("after the server's restart the microVM reads %q", out)
	}
	if out := mustExec(t, c, reader.ID, "cat /mnt/shared/c.txt"); out != "after-restart\n" {
		t.Fatalf("after the server's restart the read-only microVM reads %q", out)
	}
	if data, err := c.ReadVolumeFile(ctx, "shared", "/c.txt"); err != nil || string(data) != "after-restart\n" {
		t.Fatalf("files API after the restart: %q %v", data, err)
	}
	out, err = execOut(ctx, c, vmWriter.ID, "fallocate -l 2G /data/big 2>&1 || dd if=/dev/zero of=/data/fill bs=1M count=1100 2>&1")
	if err == nil || !strings.Contains(out, "No space left on device") {
		t.Fatalf("writing past the volume's size: %q %v, want ENOSPC", out, err)
	}
	for _, id := range []string{reader.ID, vmWriter.ID} {
		if _, err := c.StopSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	v, err := c.GetVolume(ctx, "shared")
	if err != nil || len(v.MountedBy) != 0 {
		t.Fatalf("the volume after its sandboxes: %+v %v", v, err)
	}
	for name, want := range map[string]string{"/a.txt": "changed\n", "/b.txt": "from-microvm\n"} {
		if data, err := c.ReadVolumeFile(ctx, "shared", name); err != nil || string(data) != want {
			t.Errorf("%s after its sandboxes: %q %v", name, data, err)
		}
	}
	if got := leftovers(t, s.DataDir, ids); len(got) > 0 {
		t.Fatalf("left behind: %v", got)
	}
}
