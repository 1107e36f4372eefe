package volume

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// openTestHost is a Host over temporary dirs with one 1 GiB volume made;
// it needs root (mount) and skips without.
func openTestHost(t *testing.T) (*Host, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("volumes mount loop file systems: needs root")
	}
	dir := t.TempDir()
	h, err := OpenHost(filepath.Join(dir, "images"), filepath.Join(dir, "mounts"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	id := "vol_0123456789abcdef"
	if err := h.Create(t.Context(), id, 1); err != nil {
		t.Fatal(err)
	}
	return h, id
}

// TestHostFiles: a file round trip through the API's calls, the image
// sparse, the root owned by the sandbox user and empty; a listing; delete.
func TestHostFiles(t *testing.T) {
	h, id := openTestHost(t)
	if alloc, _ := h.Allocated(id); alloc > 128<<20 {
		t.Errorf("a fresh 1 GiB image holds %d bytes of the host's disk", alloc)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(h.Dir(id), &st); err != nil || st.Uid != SandboxUID {
		t.Fatalf("root: %+v %v", st, err)
	}
	if _, err := h.Write(id, "/a/b/c.txt", strings.NewReader("hello"), 1<<20); err != nil {
		t.Fatal(err)
	}
	o, err := h.Open(id, "/a/b/c.txt", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(o.File)
	o.File.Close()
	if string(data) != "hello" || o.Size != 5 {
		t.Fatalf("read %q size %d", data, o.Size)
	}
	o, err = h.Open(id, "/", 1<<30)
	if err != nil || len(o.Entries) != 1 || o.Entries[0].Name != "a" || o.Entries[0].Type != "dir" {
		t.Fatalf("root listing: %+v %v", o, err)
	}
	if _, err := h.Write(id, "/big", strings.NewReader(strings.Repeat("x", 100)), 10); sandbox.KindOf(err) != sandbox.KindPayloadTooLarge {
		t.Fatalf("past the limit: %v", err)
	}
	if err := h.RemovePath(id, "/a/b/c.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(id, "/a/b/c.txt", 1<<30); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("after delete: %v", err)
	}
	if err := h.RemovePath(id, "/a"); sandbox.KindOf(err) != sandbox.KindConflict {
		t.Fatalf("non-empty dir: %v", err)
	}
	for _, p := range []string{"a", "/a/../b", "/a/"} {
		if _, err := h.Open(id, p, 1<<30); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("path %q: %v", p, err)
		}
	}
}

// TestHostHostile: what a sandbox's root leaves in its volume (symbolic
// links to host files and out of the root, a FIFO, a socket-like special
// file, a directory link on the way) is never followed by the files API
// nor by the archive out, and nothing hangs.
func TestHostHostile(t *testing.T) {
	h, id := openTestHost(t)
	dir := h.Dir(id)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("/etc/shadow", filepath.Join(dir, "x")))
	must(os.Symlink("../../../../../../etc", filepath.Join(dir, "up")))
	must(os.Symlink("/", filepath.Join(dir, "rootlink")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666))
	must(os.WriteFile(filepath.Join(dir, "real"), []byte("mine"), 0o644))
	// A sparse file far past the volume's size.
	must(os.WriteFile(filepath.Join(dir, "sparse"), nil, 0o644))
	must(os.Truncate(filepath.Join(dir, "sparse"), 1<<40))
	must(os.Link(filepath.Join(dir, "real"), filepath.Join(dir, "hard")))
	// A hard link to a host file cannot be made: another file system.
	if err := os.Link("/etc/passwd", filepath.Join(dir, "passwd")); err == nil {
		t.Fatal("a hard link out of the volume was made")
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range []string{"/x", "/up/passwd", "/rootlink/etc/passwd", "/fifo"} {
			if o, err := h.Open(id, p, 1<<30); err == nil {
				if o.File != nil {
					data, _ := io.ReadAll(o.File)
					t.Errorf("%s read: %q", p, data)
				}
				t.Errorf("%s opened: %+v", p, o)
			}
			if _, err := h.Write(id, p, strings.NewReader("owned"), 100); err == nil {
				t.Errorf("%s written", p)
			}
		}
		if _, err := h.Open(id, "/sparse", 1<<30); sandbox.KindOf(err) != sandbox.KindPayloadTooLarge {
			t.Errorf("a 1 TiB sparse file: %v, want payload_too_large", err)
		}
		if _, err := h.Write(id, "/rootlink/tmp/owned", strings.NewReader("owned"), 100); err == nil {
			t.Error("write through a directory link")
		}
		// Parents to make, behind a link out of the volume: nothing is made
		// on the host.
		canary := "withruntime-volume-canary-" + filepath.Base(dir)
		for _, p := range []string{"/rootlink/" + canary + "/f", "/up/" + canary + "/f"} {
			if _, err := h.Write(id, p, strings.NewReader("owned"), 100); err == nil {
				t.Errorf("%s written", p)
			}
			if err := h.TarIn(id, path.Dir(p), strings.NewReader(""), 100); err == nil {
				t.Errorf("archive into %s", path.Dir(p))
			}
		}
		for _, host := range []string{"/" + canary, "/etc/" + canary} {
			if _, err := os.Lstat(host); err == nil {
				os.RemoveAll(host)
				t.Errorf("%s was made on the host", host)
			}
		}
		var buf bytes.Buffer
		if err := h.TarOut(id, "/", &buf, 1<<30); err != nil {
			t.Errorf("archive out: %v", err)
		}
		tr := tar.NewReader(&buf)
		names := map[string]byte{}
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Error(err)
				return
			}
			names[hdr.Name] = hdr.Typeflag
			if hdr.Typeflag == tar.TypeReg {
				data, _ := io.ReadAll(tr)
				if string(data) != "mine" {
					t.Errorf("%s holds %q", hdr.Name, data)
				}
			}
		}
		if names["x"] != tar.TypeSymlink || names["up"] != tar.TypeSymlink || names["real"]+names["hard"] != tar.TypeReg+tar.TypeLink {
			t.Errorf("archive entries: %v", names)
		}
		if _, ok := names["fifo"]; ok {
			t.Error("the FIFO is in the archive")
		}
		if _, ok := names["sparse"]; ok {
			t.Error("the sparse file past the volume's size is in the archive")
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the files API hung on the sandbox's tree")
	}
	if data, _ := os.ReadFile("/etc/hostname"); len(data) > 0 {
		if _, err := os.Stat("/tmp/owned"); err == nil {
			t.Fatal("/tmp/owned made on the host")
		}
	}
}

// TestHostArchiveIn: a tar in lands in the volume, owned by the sandbox
// user; an entry that climbs out is refused.
func TestHostArchiveIn(t *testing.T) {
	h, id := openTestHost(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3})
	tw.Write([]byte("abc"))
	tw.Close()
	if err := h.TarIn(id, "/in", &buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(h.Dir(id), "in/d/f"))
	if err != nil || string(data) != "abc" {
		t.Fatalf("%q %v", data, err)
	}
	buf.Reset()
	tw = tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "../../escape", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	if err := h.TarIn(id, "/", &buf, 1<<20); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Fatalf("climbing entry: %v", err)
	}
}
