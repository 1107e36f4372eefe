package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/testenv"
)

const testID = "sbx0123456789abcdef"

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		testID:                  true,
		"sbx0123456789ABCDEF":   true,
		"sbx0123456789abcde":    false,
		"sbx0123456789abcdef0":  false,
		"sbx0123456789abcdeg":   false,
		"abc0123456789abcdef":   false,
		"..":                    false,
		"sbx/../../../etc/abcd": false,
		"":                      false,
	} {
		if got := validID(id); got != want {
			t.Errorf("validID(%q): got %v, want %v", id, got, want)
		}
	}
}

// TestSharedRootChecked: a shared dir that another user owns, or that
// group or others may write, is refused at start.
func TestSharedRootChecked(t *testing.T) {
	testenv.RequiresRoot(t)
	tests := []struct {
		name  string
		setup func(dir string) error
		want  string
	}{
		{"root's, 0700", func(string) error { return nil }, ""},
		{"root's, 0755", func(d string) error { return os.Chmod(d, 0o755) }, ""},
		{"writable by others", func(d string) error { return os.Chmod(d, 0o777) }, "writable by group or others"},
		{"writable by group", func(d string) error { return os.Chmod(d, 0o770) }, "writable by group or others"},
		{"another user's", func(d string) error { return os.Chown(d, 65534, 65534) }, "owned by root"},
		{"a file", func(d string) error {
			os.Remove(d)
			return os.WriteFile(d, nil, 0o600)
		}, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "shared")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tt.setup(dir); err != nil {
				t.Fatal(err)
			}
			r, err := openSharedRoot(dir)
			if r != nil {
				r.Close()
			}
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// plantedBackend is a backend whose shared dir holds, at SHARED/<testID>,
// a symlink to target; outside is a directory of the test outside the
// shared dir, holding a file that must stay.
func plantedBackend(t *testing.T, b *Backend, shared string, target func(outside string) string) string {
	t.Helper()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, checkpointDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, checkpointDir, "checkpoint.img"), []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target(outside), filepath.Join(shared, testID)); err != nil {
		t.Fatal(err)
	}
	return outside
}

func untouched(t *testing.T, outside string) {
	t.Helper()
	for name, want := range map[string]string{"victim": "keep me", checkpointDir + "/checkpoint.img": "not yours"} {
		if got, err := os.ReadFile(filepath.Join(outside, name)); err != nil || string(got) != want {
			t.Errorf("%s outside the shared dir: got %q, %v; want %q untouched", name, got, err, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(outside, checkpointDir))
	if len(entries) != 1 {
		t.Errorf("the checkpoint dir outside holds %d files, want the 1 it had", len(entries))
	}
}

// TestPlantedSharedDirRefused: a symlink planted at SHARED/<id>, to a
// directory outside or to another sandbox's dir, is refused by pause,
// destroy and resume, and nothing it points to is written or removed.
func TestPlantedSharedDirRefused(t *testing.T) {
	testenv.RequiresGvisor(t)
	targets := map[string]func(outside string) string{
		"absolute, outside": func(o string) string { return o },
		"relative, outside": func(o string) string { rel, _ := filepath.Rel("/", o); return "../../../../../../../../" + rel },
		"another sandbox's": func(string) string { return "sbxfedcba9876543210" },
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			shared := filepath.Join(t.TempDir(), "shared")
			b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), SharedCheckpoints: shared})
			if err != nil {
				t.Fatal(err)
			}
			outside := plantedBackend(t, b, shared, target)
			// The other sandbox's dir, a real one, is the target of the
			// third case.
			other := filepath.Join(shared, "sbxfedcba9876543210")
			if err := os.CopyFS(other, os.DirFS(outside)); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()

			// Pause is refused before it touches the sandbox (here a
			// stand-in: the refusal comes first).
			b.instances[testID] = &instance{}
			err = b.Pause(ctx, testID)
			if err == nil || !strings.Contains(err.Error(), "not a directory") {
				t.Errorf("pause: got %v, want a refusal: ... not a directory", err)
			}
			if _, ok := b.instances[testID]; !ok {
				t.Error("pause refused but forgot the sandbox")
			}
			delete(b.instances, testID)

			if _, err := b.ResumeDigest(ctx, testID, testSpec(), "sha256:00"); err == nil || !strings.Contains(err.Error(), "not a directory") {
				t.Errorf("resume: got %v, want a refusal: ... not a directory", err)
			}
			if err := b.Destroy(ctx, testID); err == nil || !strings.Contains(err.Error(), "not a directory") {
				t.Errorf("destroy: got %v, want a refusal: ... not a directory", err)
			}
			untouched(t, outside)
			untouched(t, other)
			if fi, err := os.Lstat(filepath.Join(shared, testID)); err != nil || fi.Mode().Type() != os.ModeSymlink {
				t.Errorf("the planted link: got %v, %v; want it left as it is", fi, err)
			}
		})
	}
}

// TestPlantedCheckpointDirRefused: SHARED/<id> is a real directory but
// its checkpoint is a symlink: resume refuses it, destroy removes the
// link and not what it points to.
func TestPlantedCheckpointDirRefused(t *testing.T) {
	testenv.RequiresGvisor(t)
	shared := filepath.Join(t.TempDir(), "shared")
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), SharedCheckpoints: shared})
	if err != nil {
		t.Fatal(err)
	}
	outside := plantedBackend(t, b, shared, func(o string) string { return o })
	os.Remove(filepath.Join(shared, testID))
	if err := os.Mkdir(filepath.Join(shared, testID), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, checkpointDir), filepath.Join(shared, testID, checkpointDir)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.ResumeDigest(ctx, testID, testSpec(), ""); err == nil {
		t.Error("resume from a checkpoint dir that is a symlink: got no error")
	}
	if err := b.Destroy(ctx, testID); err != nil {
		t.Errorf("destroy: %v", err)
	}
	untouched(t, outside)
	if _, err := os.Lstat(filepath.Join(shared, testID)); !os.IsNotExist(err) {
		t.Errorf("after destroy SHARED/<id>: got %v, want it gone", err)
	}
}

// TestCheckpointDigest: the digest covers every file's name and contents;
// anything but regular files is refused.
func TestCheckpointDigest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	digest := func() (string, error) {
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return digestDir(f)
	}
	write("checkpoint.img", "memory")
	write("pages.img", "pages")
	first, err := digest()
	if err != nil || !strings.HasPrefix(first, "sha256:") {
		t.Fatalf("got %q, %v", first, err)
	}
	if again, _ := digest(); again != first {
		t.Errorf("digest of the same files: got %s, then %s", first, again)
	}
	write("pages.img", "pageS")
	if changed, _ := digest(); changed == first {
		t.Error("a changed file kept the digest")
	}
	write("pages.img", "pages")
	os.Rename(filepath.Join(dir, "pages.img"), filepath.Join(dir, "pages2.img"))
	if renamed, _ := digest(); renamed == first {
		t.Error("a renamed file kept the digest")
	}
	os.Rename(filepath.Join(dir, "pages2.img"), filepath.Join(dir, "pages.img"))
	if back, _ := digest(); back != first {
		t.Errorf("the same files again: got %s, want %s", back, first)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "extra.img")); err != nil {
		t.Fatal(err)
	}
	if _, err := digest(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("with a symlink: got %v, want a refusal", err)
	}
}

func testSpec() sandbox.Spec {
	return sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256}
}
