package conformance

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// TestFilesActAsUser: on every backend the files API acts as the user it
// names, and the sandbox's own kernel (gVisor's, or the microVM's Linux)
// decides: as the default user /etc/shadow cannot be read nor /etc
// written, by the file routes or an archive, each refused as forbidden;
// as root it can, and what root writes is root's.
func TestFilesActAsUser(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		sb := e.create(t, small())
		tarOf := func(name string) io.Reader {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
			tw.Write([]byte("x"))
			tw.Close()
			return &buf
		}
		denied := map[string]error{}
		_, denied["read /etc/shadow"] = e.c.ReadFile(ctx, sb.ID, "/etc/shadow")
		_, denied["write /etc/conf-user.txt"] = e.c.WriteFile(ctx, sb.ID, "/etc/conf-user.txt", strings.NewReader("x"), 0o644)
		_, denied["mkdir /etc/conf-user-dir"] = e.c.MakeDir(ctx, sb.ID, "/etc/conf-user-dir")
		_, denied["archive into /etc"] = e.c.UploadArchive(ctx, sb.ID, "/etc", tarOf("conf-user-tar.txt"))
		if rc, err := e.c.DownloadArchive(ctx, sb.ID, "/etc/shadow"); err == nil {
			rc.Close()
			denied["archive of /etc/shadow"] = nil
		} else {
			denied["archive of /etc/shadow"] = err
		}
		for what, err := range denied {
			if !errors.Is(err, client.ErrForbidden) {
				t.Errorf("%s as the user: got %v, want forbidden", what, err)
			}
		}
		if got := e.out(t, sb.ID, "ls -d /etc/conf-user.txt /etc/conf-user-dir /etc/conf-user-tar.txt 2>/dev/null; echo end"); got != "end" {
			t.Errorf("/etc after the refused calls: %q, want none of them", got)
		}

		root := e.c.AsFilesUser(api.UserRoot)
		if data, err := root.ReadFile(ctx, sb.ID, "/etc/shadow"); err != nil || !bytes.HasPrefix(data, []byte("root:")) {
			t.Errorf("read /etc/shadow as root: got %.20q, %v", data, err)
		}
		if _, err := root.WriteFile(ctx, sb.ID, "/etc/conf-root.txt", strings.NewReader("r"), 0o644); err != nil {
			t.Errorf("write /etc as root: %v", err)
		}
		if _, err := root.UploadArchive(ctx, sb.ID, "/etc", tarOf("conf-root-tar.txt")); err != nil {
			t.Errorf("archive into /etc as root: %v", err)
		}
		if got := e.out(t, sb.ID, "stat -c %U:%G /etc/conf-root.txt /etc/conf-root-tar.txt"); got != "root:root\nroot:root" {
			t.Errorf("root's files are owned by %q, want root:root", got)
		}
	})
}
