package e2e

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// "sandbox cp" through the binary, both ways, with docker cp's rules for
// where things land, and the download's refusal to follow what the
// sandbox's symbolic links point at.
func TestCLICopy(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "512", "--timeout", "10m")
	if code != 0 {
		t.Fatalf("create: exit %d stderr %q", code, errs)
	}
	id := strings.TrimSpace(out)
	defer cli(t, env, "sandbox", "rm", id)
	sh := func(script string) string {
		t.Helper()
		out, errs, code := cli(t, env, "sandbox", "exec", id, "--", "sh", "-c", script)
		if code != 0 {
			t.Fatalf("exec %q: exit %d stdout %q stderr %q", script, code, out, errs)
		}
		return out
	}
	cp := func(src, dst string) {
		t.Helper()
		if out, errs, code := cli(t, env, "sandbox", "cp", src, dst); code != 0 || out != "" || errs != "" {
			t.Fatalf("cp %s %s: exit %d stdout %q stderr %q, want 0 and no output", src, dst, code, out, errs)
		}
	}

	work := t.TempDir()
	tree := filepath.Join(work, "tree")
	binary := []byte("\xff\xfe\x00bytes\r\n\x80")
	files := map[string]struct {
		body []byte
		mode fs.FileMode
	}{
		"a.txt":                {[]byte("top\n"), 0o644},
		"sub/nested/deep.bin":  {binary, 0o600},
		"bin/run.sh":           {[]byte("#!/bin/sh\necho ran\n"), 0o755},
		"sub/nested/other.txt": {[]byte(""), 0o644},
	}
	for name, f := range files {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.body, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	sameTree := func(t *testing.T, got string) {
		t.Helper()
		for name, f := range files {
			p := filepath.Join(got, name)
			body, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !bytes.Equal(body, f.body) {
				t.Errorf("%s: got %q, want %q", name, body, f.body)
			}
			fi, _ := os.Lstat(p)
			if fi.Mode() != f.mode {
				t.Errorf("%s: got mode %v, want %v", name, fi.Mode(), f.mode)
			}
		}
		n := 0
		filepath.WalkDir(got, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		if n != len(files) {
			t.Errorf("%s holds %d files, want %d", got, n, len(files))
		}
	}

	t.Run("a directory tree round-trips", func(t *testing.T) {
		cp(tree, id+":/tmp/up") // missing: becomes /tmp/up
		if got := sh("cat /tmp/up/bin/run.sh && stat -c %a /tmp/up/bin/run.sh && /tmp/up/bin/run.sh && od -An -tx1 /tmp/up/sub/nested/deep.bin | tr -d ' \\n'"); got != "#!/bin/sh\necho ran\n755\nran\nfffe0062797465730d0a80" {
			t.Fatalf("in the sandbox: got %q", got)
		}
		cp(tree, id+":/tmp/up") // existing: lands in /tmp/up/tree
		if got := sh("cat /tmp/up/tree/a.txt; test -e /tmp/up/a.txt && echo kept"); got != "top\nkept\n" {
			t.Fatalf("copied onto an existing directory: got %q, want /tmp/up/tree/a.txt and /tmp/up/a.txt", got)
		}

		back := filepath.Join(work, "back")
		cp(id+":/tmp/up/tree", back) // missing: becomes back
		sameTree(t, back)
		cp(id+":/tmp/up/tree", back) // existing: lands in back/tree
		sameTree(t, filepath.Join(back, "tree"))

		contents := filepath.Join(work, "contents")
		if err := os.Mkdir(contents, 0o755); err != nil {
			t.Fatal(err)
		}
		cp(id+":/tmp/up/tree/.", contents) // "/.": the contents into an existing directory
		sameTree(t, contents)
	})

	t.Run("a single file both ways, and into directories", func(t *testing.T) {
		f := filepath.Join(work, "one.bin")
		if err := os.WriteFile(f, binary, 0o640); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f, 0o640)
		cp(f, id+":/tmp/one-copy.bin")
		cp(f, id+":/tmp/up") // an existing directory: lands inside
		if got := sh("stat -c '%a %s' /tmp/one-copy.bin /tmp/up/one.bin"); got != "640 11\n640 11\n" {
			t.Fatalf("in the sandbox: got %q, want both files with mode 640 and 11 bytes", got)
		}
		local := filepath.Join(work, "one-back.bin")
		cp(id+":/tmp/one-copy.bin", local)
		dir := filepath.Join(work, "into")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cp(id+":/tmp/one-copy.bin", dir)
		for _, p := range []string{local, filepath.Join(dir, "one-copy.bin")} {
			body, err := os.ReadFile(p)
			fi, _ := os.Stat(p)
			if err != nil || !bytes.Equal(body, binary) || fi.Mode() != 0o640 {
				t.Fatalf("%s: got %q (%v), want the file's bytes with mode 640", p, body, err)
			}
		}
	})

	t.Run("relative sandbox paths are under /workspace", func(t *testing.T) {
		cp(filepath.Join(tree, "a.txt"), id+":rel/a.txt")
		cp(tree, id+":reltree")
		if got := sh("cat /workspace/rel/a.txt /workspace/reltree/bin/run.sh"); got != "top\n#!/bin/sh\necho ran\n" {
			t.Fatalf("got %q", got)
		}
		back := filepath.Join(work, "relback")
		cp(id+":reltree", back)
		sameTree(t, back)
	})

	t.Run("a tar stream in and out with -", func(t *testing.T) {
		var in bytes.Buffer
		tw := tar.NewWriter(&in)
		tw.WriteHeader(&tar.Header{Name: "s/x.txt", Mode: 0o755, Size: 3, Typeflag: tar.TypeReg})
		tw.Write([]byte("abc"))
		tw.Close()
		runStdin(t, env, &in, "sandbox", "cp", "-", id+":/tmp/stream")
		if got := sh("cat /tmp/stream/s/x.txt; stat -c %a /tmp/stream/s/x.txt"); got != "abc755\n" {
			t.Fatalf("got %q", got)
		}
		out := runStdin(t, env, nil, "sandbox", "cp", id+":/tmp/stream", "-")
		tr := tar.NewReader(strings.NewReader(out))
		var names []string
		for {
			hdr, err := tr.Next()
			if err != nil {
				break
			}
			names = append(names, hdr.Name)
			if hdr.Name == "s/x.txt" {
				if b, _ := io.ReadAll(tr); string(b) != "abc" {
					t.Errorf("s/x.txt: got %q", b)
				}
			}
		}
		if strings.Join(names, ",") != "s/,s/x.txt" {
			t.Fatalf("got entries %q, want s/ and s/x.txt", names)
		}
	})

	t.Run("an unknown sandbox is not_found", func(t *testing.T) {
		for _, args := range [][]string{
			{filepath.Join(tree, "a.txt"), "sbx_nope:/tmp/x"},
			{tree, "sbx_nope:/tmp/x"},
			{"sbx_nope:/tmp/x", filepath.Join(work, "nope")},
		} {
			_, errs, code := cli(t, env, append([]string{"sandbox", "cp"}, args...)...)
			if code != 1 || !strings.HasPrefix(errs, "error: not_found: ") {
				t.Errorf("cp %v: got exit %d stderr %q, want 1 and error: not_found:", args, code, errs)
			}
		}
		if _, err := os.Stat(filepath.Join(work, "nope")); err == nil {
			t.Errorf("a failed download made its destination")
		}
	})

	t.Run("the sandbox's symbolic links are never followed here", func(t *testing.T) {
		outside := t.TempDir() // the host directory the sandbox aims at
		sh("mkdir -p /tmp/evil && ln -s " + outside + " /tmp/evil/out && ln -s " + outside + "/f /tmp/lnk")
		dst := filepath.Join(work, "evil")
		cp(id+":/tmp/evil", dst)
		if target, err := os.Readlink(filepath.Join(dst, "out")); err != nil || target != outside {
			t.Fatalf("evil/out: got link %q (%v), want a link to %s", target, err, outside)
		}
		cp(id+":/tmp/lnk", filepath.Join(work, "lnk")) // a link alone is made as a link
		if target, err := os.Readlink(filepath.Join(work, "lnk")); err != nil || target != outside+"/f" {
			t.Fatalf("lnk: got link %q (%v), want a link to %s/f", target, err, outside)
		}

		// Now the sandbox has a real directory where the link was: copying
		// it again onto the tree here would write through that link.
		sh("rm /tmp/evil/out && mkdir /tmp/evil/out && echo pwned > /tmp/evil/out/pwn")
		_, errs, code := cli(t, env, "sandbox", "cp", id+":/tmp/evil/.", dst)
		if code != 1 || !strings.HasPrefix(errs, "error: conflict: ") || !strings.Contains(errs, "symbolic link") {
			t.Errorf("copying through a link: got exit %d stderr %q, want 1 and error: conflict: ... symbolic link", code, errs)
		}
		entries, err := os.ReadDir(outside)
		if err != nil || len(entries) != 0 {
			t.Fatalf("the directory outside holds %v (%v), want nothing", entries, err)
		}
	})
}

// runStdin runs the CLI with stdin and returns its stdout; it must exit 0.
func runStdin(t *testing.T, env []string, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.CLI(t), args...)
	cmd.Env, cmd.Stdin = env, stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("withruntime %v: %v (stderr %q)", args, err, errb.String())
	}
	return out.String()
}
