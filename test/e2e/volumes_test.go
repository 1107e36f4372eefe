package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// apiCode is the stable code of a client error ("" when none).
func apiCode(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// TestVolumes: a volume shared by a writable and a read-only sandbox (the
// reader sees the writer's files, its own writes fail), outliving both, a
// third sandbox reading what they left; its size enforced inside; the
// files API round trip; a sandbox's root attacking the host through the
// volume (symbolic links, a hard link, a FIFO) while the host reads it; and
// the refusals.
func TestVolumes(t *testing.T) {
	s := testenv.StartServer(t, "--storage-quota-gib", "3")
	ctx := t.Context()
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	vol, err := c.CreateVolume(ctx, "data", 1)
	if err != nil {
		t.Fatal(err)
	}
	if vol.Name != "data" || vol.SizeGiB != 1 || len(vol.MountedBy) != 0 {
		t.Fatalf("created: %+v", vol)
	}
	create := func(mounts ...api.VolumeMount) (*api.Sandbox, error) {
		sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, Volumes: mounts})
		if err == nil {
			t.Cleanup(func() { c.StopSandbox(context.Background(), sb.ID) })
		}
		return sb, err
	}
	writer, err := create(api.VolumeMount{Name: "data", Path: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := create(api.VolumeMount{Name: "data", Path: "/mnt/data", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(reader.Volumes) != 1 || reader.Volumes[0].Path != "/mnt/data" || !reader.Volumes[0].ReadOnly {
		t.Errorf("reader's volumes: %+v", reader.Volumes)
	}

	t.Run("shared between sandboxes", func(t *testing.T) {
		// As the sandbox user, who owns the volume's root.
		mustExec(t, c, writer.ID, "echo one > /data/a.txt && mkdir -p /data/d && echo two > /data/d/b.txt")
		if out := mustExec(t, c, reader.ID, "cat /mnt/data/a.txt /mnt/data/d/b.txt"); out != "one\ntwo\n" {
			t.Fatalf("reader sees %q", out)
		}
		// A change after the reader looked: shared file access, no stale
		// cache.
		mustExec(t, c, writer.ID, "echo three > /data/a.txt")
		if out := mustExec(t, c, reader.ID, "cat /mnt/data/a.txt"); out != "three\n" {
			t.Fatalf("reader sees %q after the change", out)
		}
		out, err := execOut(ctx, c, reader.ID, "(echo x > /mnt/data/ro.txt) 2>&1; sudo sh -c 'echo x > /mnt/data/ro2.txt' 2>&1")
		if err == nil || !strings.Contains(out, "Read-only file system") {
			t.Fatalf("reader's write: %q %v, want EROFS", out, err)
		}
		v, err := c.GetVolume(ctx, "data")
		if err != nil || len(v.MountedBy) != 2 || v.UsedBytes <= 0 {
			t.Fatalf("volume while mounted: %+v %v", v, err)
		}
	})

	t.Run("a read-only mount is snapshotted and forked", func(t *testing.T) {
		// A process of the reader holds a file of the volume open; its
		// copies read on from it.
		mustExec(t, c, reader.ID, "nohup python3 -c 'import time; f = open(\"/mnt/data/a.txt\"); time.sleep(3600)' >/dev/null 2>&1 &")
		res, err := c.Fork(ctx, reader.ID, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		fork := res.Sandboxes[0]
		t.Cleanup(func() { c.StopSandbox(context.Background(), fork.ID) })
		if len(fork.Volumes) != 1 || fork.Volumes[0].Path != "/mnt/data" || !fork.Volumes[0].ReadOnly {
			t.Fatalf("the fork's volumes: %+v", fork.Volumes)
		}
		// Made through the API, naming no volumes: the snapshot's are
		// resolved and claimed as any create's.
		restored, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Snapshot: res.Snapshot.ID})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.StopSandbox(context.Background(), restored.ID) })
		for _, id := range []string{fork.ID, restored.ID} {
			if out := mustExec(t, c, id, "cat /mnt/data/a.txt; pgrep -fc '[t]ime.sleep'"); out != "three\n1\n" {
				t.Fatalf("%s reads %q", id, out)
			}
			out, err := execOut(ctx, c, id, "sudo sh -c 'echo x > /mnt/data/fork.txt' 2>&1")
			if err == nil || !strings.Contains(out, "Read-only file system") {
				t.Fatalf("%s wrote the read-only volume: %q %v", id, out, err)
			}
		}
		if v, err := c.GetVolume(ctx, "data"); err != nil || len(v.MountedBy) != 4 {
			t.Fatalf("the volume with two copies of the reader: %+v %v, want 4 mounts", v, err)
		}
		if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Snapshot: res.Snapshot.ID, Volumes: []api.VolumeMount{{Name: "data", Path: "/elsewhere", ReadOnly: true}}}); apiCode(err) != "invalid_request" {
			t.Fatalf("a create from the snapshot with other mounts: %v, want invalid_request", err)
		}
		for _, id := range []string{fork.ID, restored.ID} {
			if _, err := c.StopSandbox(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.DeleteSnapshot(ctx, res.Snapshot.ID); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		if _, err := create(api.VolumeMount{Name: "data", Path: "/w2"}); apiCode(err) != "conflict" {
			t.Errorf("second writer: %v, want conflict", err)
		}
		if err := c.DeleteVolume(ctx, "data"); apiCode(err) != "conflict" {
			t.Errorf("delete while mounted: %v, want conflict", err)
		}
		if st, body := call(t, s, s.Key, "POST", "/v1/sandboxes/"+writer.ID+"/snapshots", strings.NewReader(`{}`)); st != 422 {
			t.Errorf("snapshot of a sandbox with a volume: %d %s, want 422", st, body)
		}
		for _, p := range []string{"/", "/proc", "/proc/x", "/sys", "/dev", "/run", "/opt/withruntime", "rel", "/a/../b"} {
			if _, err := create(api.VolumeMount{Name: "data", Path: p, ReadOnly: true}); apiCode(err) != "invalid_request" {
				t.Errorf("path %q: %v, want invalid_request", p, err)
			}
		}
		if _, err := create(api.VolumeMount{Name: "nope", Path: "/x", ReadOnly: true}); apiCode(err) != "not_found" {
			t.Errorf("unknown volume: %v, want not_found", err)
		}
		if _, err := c.CreateVolume(ctx, "Bad Name", 1); apiCode(err) != "invalid_request" {
			t.Errorf("bad name: %v", err)
		}
		if _, err := c.CreateVolume(ctx, "data", 1); apiCode(err) != "conflict" {
			t.Errorf("existing name: %v", err)
		}
		if _, err := c.CreateVolume(ctx, "big", 3); apiCode(err) != "forbidden" {
			t.Errorf("past the storage quota: %v, want forbidden", err)
		}
		if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Isolation: "microvm", OnLeaseEnd: "pause", Volumes: []api.VolumeMount{{Name: "data", Path: "/x", ReadOnly: true}}}); apiCode(err) != "not_supported" && apiCode(err) != "invalid_request" {
			t.Errorf("microvm that would pause: %v, want not_supported (or invalid_request where the server has no microVMs)", err)
		}
		// Another account: the same answer as no volume at all.
		newAccount(t, s, `{"name":"other"}`)
		k := newKey(t, s, `{"account":"other"}`)
		oc, _ := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(k.Secret))
		if _, err := oc.GetVolume(ctx, "data"); apiCode(err) != "not_found" {
			t.Errorf("other account's get: %v", err)
		}
		if _, err := oc.ReadVolumeFile(ctx, "data", "/a.txt"); apiCode(err) != "not_found" {
			t.Errorf("other account's read: %v", err)
		}
		if _, err := oc.CreateSandbox(ctx, api.CreateSandboxRequest{Volumes: []api.VolumeMount{{Name: "data", Path: "/x", ReadOnly: true}}}); apiCode(err) != "not_found" {
			t.Errorf("other account's mount: %v", err)
		}
	})

	t.Run("size enforced", func(t *testing.T) {
		out, err := execOut(ctx, c, writer.ID, "dd if=/dev/zero of=/data/fill bs=1M count=1100 2>&1")
		if err == nil || !strings.Contains(out, "No space left on device") {
			t.Fatalf("writing past 1 GiB: %q %v, want ENOSPC", out, err)
		}
		mustExec(t, c, writer.ID, "rm /data/fill")
	})

	t.Run("files API", func(t *testing.T) {
		if err := c.WriteVolumeFile(ctx, "data", "/api/x/y.txt", strings.NewReader("from the api")); err != nil {
			t.Fatal(err)
		}
		if out := mustExec(t, c, writer.ID, "cat /data/api/x/y.txt"); out != "from the api" {
			t.Fatalf("sandbox sees %q", out)
		}
		got, err := c.ReadVolumeFile(ctx, "data", "/a.txt")
		if err != nil || string(got) != "three\n" {
			t.Fatalf("read: %q %v", got, err)
		}
		ents, err := c.ListVolumeFiles(ctx, "data", "/")
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]string{}
		for _, e := range ents {
			names[e.Name] = e.Type
		}
		if names["a.txt"] != "file" || names["d"] != "dir" || names["api"] != "dir" {
			t.Fatalf("listing: %+v", ents)
		}
		if err := c.DeleteVolumeFile(ctx, "data", "/api/x/y.txt"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadVolumeFile(ctx, "data", "/api/x/y.txt"); apiCode(err) != "not_found" {
			t.Fatalf("after delete: %v", err)
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "in/z.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3})
		tw.Write([]byte("zzz"))
		tw.Close()
		if err := c.UploadVolumeArchive(ctx, "data", "/up", &buf); err != nil {
			t.Fatal(err)
		}
		if out := mustExec(t, c, writer.ID, "cat /data/up/in/z.txt && stat -c %U /data/up/in/z.txt"); out != "zzzuser\n" {
			t.Fatalf("sandbox sees %q", out)
		}
		entries := tarEntries(t, c, "/")
		if entries["up/in/z.txt"] != "zzz" || entries["a.txt"] != "three\n" {
			t.Fatalf("archive out: %v", entries)
		}
	})

	t.Run("a sandbox's root attacks the host through the volume", func(t *testing.T) {
		mustExec(t, c, writer.ID, `sudo sh -c '
			ln -s /etc/shadow /data/x && ln -s ../../../../../../etc /data/up2 && ln -s / /data/root &&
			mkfifo /data/fifo && (ln /etc/passwd /data/hard 2>/dev/null; true) && ln /data/a.txt /data/hard2 &&
			truncate -s 1T /data/sparse'`)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, p := range []string{"/x", "/up2/passwd", "/root/etc/passwd"} {
				if data, err := c.ReadVolumeFile(ctx, "data", p); err == nil || apiCode(err) != "invalid_request" {
					t.Errorf("read %s: %q %v, want invalid_request", p, data, err)
				}
			}
			// gVisor keeps a FIFO made inside in its own kernel (the host
			// sees no name); were one there, it is refused, not opened.
			if data, err := c.ReadVolumeFile(ctx, "data", "/fifo"); err == nil || apiCode(err) != "invalid_request" && apiCode(err) != "not_found" {
				t.Errorf("read /fifo: %q %v", data, err)
			}
			if err := c.WriteVolumeFile(ctx, "data", "/root/tmp/owned", strings.NewReader("x")); err == nil {
				t.Error("a write through the sandbox's link")
			}
			// Parents to make behind the sandbox's links: nothing appears on
			// the host.
			canary := "withruntime-e2e-canary-" + filepath.Base(s.DataDir)
			for _, p := range []string{"/root/" + canary + "/f", "/up2/" + canary + "/f"} {
				if err := c.WriteVolumeFile(ctx, "data", p, strings.NewReader("x")); err == nil {
					t.Errorf("%s written", p)
				}
				if err := c.UploadVolumeArchive(ctx, "data", path.Dir(p), bytes.NewReader(nil)); err == nil {
					t.Errorf("archive into %s", path.Dir(p))
				}
			}
			for _, host := range []string{"/" + canary, "/etc/" + canary} {
				if _, err := os.Lstat(host); err == nil {
					os.RemoveAll(host)
					t.Errorf("%s was made on the host", host)
				}
			}
			entries := tarEntries(t, c, "/")
			if entries["x"] != "-> /etc/shadow" || entries["root"] != "-> /" {
				t.Errorf("links in the archive: x %q, root %q", entries["x"], entries["root"])
			}
			if _, ok := entries["fifo"]; ok {
				t.Error("the FIFO is in the archive")
			}
			if _, ok := entries["sparse"]; ok {
				t.Error("a 1 TiB sparse file is in the archive")
			}
			if _, err := c.ReadVolumeFile(ctx, "data", "/sparse"); apiCode(err) != "payload_too_large" {
				t.Errorf("reading a 1 TiB sparse file: %v, want payload_too_large", err)
			}
			// a.txt and hard2 are one file: its first name carries the bytes,
			// the other is a hard link to it.
			if pair := entries["a.txt"] + "|" + entries["hard2"]; pair != "three\n|=> a.txt" && pair != "=> hard2|three\n" {
				t.Errorf("hard link inside the volume: %q", pair)
			}
			for name, data := range entries {
				if strings.Contains(data, "root:") {
					t.Errorf("%s holds a host file: %q", name, data)
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the files API hung on the sandbox's tree")
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		if _, err := c.PauseSandbox(ctx, writer.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteVolumeFile(ctx, "data", "/while-paused.txt", strings.NewReader("p")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ResumeSandbox(ctx, writer.ID); err != nil {
			t.Fatal(err)
		}
		if out := mustExec(t, c, writer.ID, "cat /data/while-paused.txt && echo after > /data/after.txt && cat /data/after.txt"); out != "pafter\n" {
			t.Fatalf("after resume: %q", out)
		}
	})

	t.Run("outlives its sandboxes", func(t *testing.T) {
		for _, id := range []string{writer.ID, reader.ID} {
			if _, err := c.StopSandbox(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		third, err := create(api.VolumeMount{Name: "data", Path: "/data"})
		if err != nil {
			t.Fatal(err)
		}
		if out := mustExec(t, c, third.ID, "cat /data/a.txt /data/d/b.txt"); out != "three\ntwo\n" {
			t.Fatalf("third sandbox sees %q", out)
		}
		if _, err := c.StopSandbox(ctx, third.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteVolume(ctx, "data"); err != nil {
			t.Fatalf("delete once unmounted: %v", err)
		}
		if _, err := c.GetVolume(ctx, "data"); apiCode(err) != "not_found" {
			t.Fatalf("after delete: %v", err)
		}
		status, body := call(t, s, s.Key, "GET", "/v1/audit?limit=1000", nil)
		var audit api.AuditLog
		if status != 200 || json.Unmarshal(body, &audit) != nil {
			t.Fatalf("audit: %d %s", status, body)
		}
		seen := map[string]bool{}
		for _, e := range audit.Entries {
			if e.Target == "data" {
				seen[e.Action] = true
			}
		}
		if !seen["volume.create"] || !seen["volume.delete"] {
			t.Fatalf("the audit log lacks the volume's create or delete: %v", seen)
		}
	})
}

// tarEntries reads volume data's archive of p: each file's contents, each
// symbolic link as "-> target", each hard link as "=> target".
func tarEntries(t *testing.T, c *client.Client, p string) map[string]string {
	t.Helper()
	rc, err := c.DownloadVolumeArchive(t.Context(), "data", p)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("archive: %v", err)
		}
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			out[hdr.Name] = "-> " + hdr.Linkname
		case tar.TypeLink:
			out[hdr.Name] = "=> " + hdr.Linkname
		case tar.TypeReg:
			data, _ := io.ReadAll(tr)
			out[hdr.Name] = string(data)
		}
	}
}

// TestVolumeCLI: volume create, cp both ways (a file and a directory),
// ls, sandbox create --volume, rm refused while mounted, then done.
func TestVolumeCLI(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, env, args...)
		if code != 0 {
			t.Fatalf("withruntime %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	run("volume", "create", "cache", "--size-gib", "1")
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "tree", "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "tree", "sub", "f.txt"), []byte("deep"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "one.txt"), []byte("single"), 0o644))
	run("volume", "cp", filepath.Join(dir, "one.txt"), "cache:/one.txt")
	run("volume", "cp", filepath.Join(dir, "tree"), "cache:/tree")
	run("volume", "cp", filepath.Join(dir, "one.txt"), "cache:/tree") // into the directory
	id := strings.TrimSpace(run("sandbox", "create", "--vcpus", "1", "--memory", "512", "--volume", "cache:/cache:ro"))
	t.Cleanup(func() { cli(t, env, "sandbox", "stop", id) })
	out := run("sandbox", "exec", id, "--", "cat", "/cache/one.txt", "/cache/tree/sub/f.txt", "/cache/tree/one.txt")
	if out != "singledeepsingle" {
		t.Fatalf("sandbox sees %q", out)
	}
	if ls := run("volume", "ls"); !strings.Contains(ls, "cache") || !strings.Contains(ls, id) {
		t.Fatalf("ls: %q", ls)
	}
	if _, errOut, code := cli(t, env, "volume", "rm", "cache"); code == 0 || !strings.Contains(errOut, "conflict") {
		t.Fatalf("rm while mounted: exit %d %q", code, errOut)
	}
	back := filepath.Join(t.TempDir(), "back")
	run("volume", "cp", "cache:/tree", back)
	if data, err := os.ReadFile(filepath.Join(back, "sub", "f.txt")); err != nil || string(data) != "deep" {
		t.Fatalf("copied out: %q %v", data, err)
	}
	run("volume", "cp", "cache:/one.txt", filepath.Join(dir, "copy.txt"))
	if data, _ := os.ReadFile(filepath.Join(dir, "copy.txt")); string(data) != "single" {
		t.Fatalf("file copied out: %q", data)
	}
	run("sandbox", "stop", id)
	if out := run("volume", "rm", "cache"); strings.TrimSpace(out) != "cache" {
		t.Fatalf("rm: %q", out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestVolumeRestart: a server restart while a sandbox mounts a volume
// leaves the mount where it is (the sandbox keeps its files, the next
// server takes the mount over, never mounting the image twice); the volume
// still refuses its deletion, and once the sandbox ends, it is deleted and
// its loop device released.
func TestVolumeRestart(t *testing.T) {
	s := testenv.StartServer(t)
	ctx := t.Context()
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateVolume(ctx, "keep", 1); err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, Volumes: []api.VolumeMount{{Name: "keep", Path: "/keep"}}})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, sb.ID, "echo before > /keep/a")
	s.Stop(false)
	s.Start()
	c, _ = client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if out := mustExec(t, c, sb.ID, "cat /keep/a && echo after > /keep/b"); out != "before\n" {
		t.Fatalf("after the restart the sandbox reads %q", out)
	}
	if got, err := c.ReadVolumeFile(ctx, "keep", "/b"); err != nil || string(got) != "after\n" {
		t.Fatalf("files API after the restart: %q %v (the host and the sandbox see one file system)", got, err)
	}
	if err := c.DeleteVolume(ctx, "keep"); apiCode(err) != "conflict" {
		t.Fatalf("delete while mounted, after the restart: %v", err)
	}
	if n := loopsOf(t, s.DataDir); n != 1 {
		t.Fatalf("the volume's image is on %d loop devices, want 1", n)
	}
	if _, err := c.StopSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	if n := loopsOf(t, s.DataDir); n != 0 {
		t.Fatalf("after delete the image is still on %d loop devices", n)
	}
}

// loopsOf counts the loop devices backed by a volume image of dataDir.
func loopsOf(t *testing.T, dataDir string) int {
	t.Helper()
	out, err := exec.Command("losetup", "-a").Output()
	if err != nil {
		t.Fatalf("losetup: %v", err)
	}
	abs, _ := filepath.Abs(filepath.Join(dataDir, "volumes"))
	return strings.Count(string(out), abs+"/")
}
