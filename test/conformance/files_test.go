package conformance

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

func TestFiles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		sb := e.create(t, small())
		info, err := e.c.WriteFile(ctx, sb.ID, "dir/hello.txt", strings.NewReader("hi\n"), 0o644)
		if err != nil || info.Path != "/workspace/dir/hello.txt" || info.Size != 3 {
			t.Fatalf("write: got %+v, %v", info, err)
		}
		if got := e.out(t, sb.ID, "stat -c %U dir/hello.txt; cat dir/hello.txt"); got != "user\nhi" {
			t.Fatalf("inside: got %q, want owned by user with the content", got)
		}
		data, err := e.c.ReadFile(ctx, sb.ID, "/workspace/dir/hello.txt")
		if err != nil || string(data) != "hi\n" {
			t.Fatalf("read: got %q, %v", data, err)
		}
		if _, err := e.c.MakeDir(ctx, sb.ID, "dir/a/b"); err != nil {
			t.Fatal(err)
		}
		list, err := e.c.ListFiles(ctx, sb.ID, "dir")
		if err != nil || len(list) != 2 || list[0].Name != "a" || list[0].Type != api.FileTypeDir || list[1].Name != "hello.txt" {
			t.Fatalf("list: got %+v, %v", list, err)
		}
		if st, err := e.c.StatFile(ctx, sb.ID, "dir/hello.txt"); err != nil || st.Type != api.FileTypeFile {
			t.Fatalf("stat: got %+v, %v", st, err)
		}
		if err := e.c.RemoveFile(ctx, sb.ID, "dir", true); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.StatFile(ctx, sb.ID, "dir"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("stat after remove: got %v, want not_found", err)
		}

		t.Run("path attacks", func(t *testing.T) {
			for _, p := range []string{"../etc/passwd", "a/../../etc", "a\x00b", ""} {
				if _, err := e.c.ReadFile(ctx, sb.ID, p); !errors.Is(err, client.ErrInvalidRequest) {
					t.Errorf("read %q: got %v, want invalid_request", p, err)
				}
			}
			// A symlink the sandbox made is resolved inside the sandbox:
			// it can never reach the host's file.
			flag := filepath.Join(t.TempDir(), "host-flag")
			os.WriteFile(flag, []byte("HOST-SECRET"), 0o644)
			e.out(t, sb.ID, "ln -s "+flag+" link")
			data, err := e.c.ReadFile(ctx, sb.ID, "link")
			if bytes.Contains(data, []byte("HOST-SECRET")) {
				t.Fatalf("read the host's file through a sandbox symlink")
			}
			if err == nil {
				t.Fatalf("read a dangling symlink: got %q, want an error", data)
			}
		})

		t.Run("directory round trip as one archive", func(t *testing.T) {
			src := t.TempDir()
			os.MkdirAll(filepath.Join(src, "pkg", "sub"), 0o755)
			os.WriteFile(filepath.Join(src, "pkg", "main.py"), []byte("print('from upload')\n"), 0o644)
			os.WriteFile(filepath.Join(src, "pkg", "sub", "data.bin"), bytes.Repeat([]byte{0, 1, 2}, 100000), 0o600)
			os.Symlink("main.py", filepath.Join(src, "pkg", "entry.py"))
			if _, err := e.c.UploadDir(ctx, sb.ID, filepath.Join(src, "pkg"), "proj"); err != nil {
				t.Fatalf("upload: %v", err)
			}
			if got := e.out(t, sb.ID, "cd proj && python3 entry.py && wc -c < sub/data.bin"); got != "from upload\n300000" {
				t.Fatalf("inside: got %q", got)
			}
			e.out(t, sb.ID, "echo made-inside > proj/new.txt")
			dst := filepath.Join(t.TempDir(), "back")
			if err := e.c.DownloadDir(ctx, sb.ID, "proj", dst); err != nil {
				t.Fatalf("download: %v", err)
			}
			got, _ := os.ReadFile(filepath.Join(dst, "new.txt"))
			bin, _ := os.ReadFile(filepath.Join(dst, "sub", "data.bin"))
			link, _ := os.Readlink(filepath.Join(dst, "entry.py"))
			if string(got) != "made-inside\n" || len(bin) != 300000 || link != "main.py" {
				t.Fatalf("downloaded tree: new.txt %q, data.bin %d bytes, link %q", got, len(bin), link)
			}
		})

		t.Run("archive entries that climb out are refused", func(t *testing.T) {
			for _, name := range []string{"../escape.txt", "/abs.txt", "a/../../escape.txt"} {
				var buf bytes.Buffer
				tw := tar.NewWriter(&buf)
				tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
				tw.Write([]byte("x"))
				tw.Close()
				_, err := e.c.UploadArchive(ctx, sb.ID, "target", &buf)
				if !errors.Is(err, client.ErrInvalidRequest) {
					t.Errorf("entry %q: got %v, want invalid_request", name, err)
				}
			}
			if got := e.out(t, sb.ID, "ls /workspace/escape.txt /escape.txt /abs.txt 2>/dev/null | wc -l"); got != "0" {
				t.Fatalf("an entry was written outside the target: %s files", got)
			}
		})
	})
}
