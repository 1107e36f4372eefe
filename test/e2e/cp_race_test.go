package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// swapLoop runs as the sandbox's ordinary user: it keeps /workspace/out.txt
// switching between a file ("f") and a directory holding .bashrc ("pwned"),
// each switch two renames of prepared twins, so the path is missing only
// between them. Each shape stays for up to 4 ms: about the time between two
// requests of one copy. It ends by itself after two minutes.
const swapLoop = `
import os, random, time
os.chdir("/workspace")
with open(".f", "w") as f:
    f.write("f")
os.mkdir(".d")
with open(".d/.bashrc", "w") as f:
    f.write("pwned")
os.rename(".f", "out.txt")
open(".swapping", "w").close()
end = time.monotonic() + 120
while time.monotonic() < end:
    os.rename("out.txt", ".f"); os.rename(".d", "out.txt")
    time.sleep(random.uniform(0, 0.004))
    os.rename("out.txt", ".d"); os.rename(".f", "out.txt")
    time.sleep(random.uniform(0, 0.004))
`

// Issue 22, finding 1, with a real agent: while the sandbox's user swaps
// out.txt between a file and a directory holding .bashrc, "sandbox cp
// ID:/workspace/out.txt HOME/" into a HOME holding its own .bashrc never
// touches HOME/.bashrc. The CLI before the fix stat'd the source first and,
// when the stat saw the file and the archive then held the directory,
// extracted the directory's contents into HOME: its .bashrc was replaced
// within a few tries. Now the archive alone says file or directory, and
// either lands as HOME/out.txt (docker cp's rules) or the copy fails.
func TestCLICopyRace(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "512", "--timeout", "10m")
	if code != 0 {
		t.Fatalf("create: exit %d stderr %q", code, errs)
	}
	id := strings.TrimSpace(out)
	defer func() {
		cli(t, env, "sandbox", "rm", id)
		if got := leftovers(t, s.DataDir, []string{id}); len(got) > 0 {
			t.Errorf("left on the host after the rm: %v", got)
		}
	}()

	body, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-c", swapLoop}}, Background: true, User: api.UserDefault})
	if status, data := call(t, s, s.Key, "POST", "/v1/sandboxes/"+id+"/exec", strings.NewReader(string(body))); status/100 != 2 {
		t.Fatalf("starting the swap loop: got %d %s, want 2xx", status, data)
	}
	if _, errs, code := cli(t, env, "sandbox", "exec", id, "--", "sh", "-c",
		"for i in $(seq 100); do test -e /workspace/.swapping && exit 0; sleep 0.1; done; exit 1"); code != 0 {
		t.Fatalf("the swap loop did not start: exit %d stderr %q", code, errs)
	}

	home := t.TempDir() // the host user's home
	bashrc := filepath.Join(home, ".bashrc")
	if err := os.WriteFile(bashrc, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	const tries = 40
	var files, dirs, failed int
	start := time.Now()
	for i := range tries {
		_, errs, code := cli(t, env, "sandbox", "cp", id+":/workspace/out.txt", home+"/")
		if got, err := os.ReadFile(bashrc); err != nil || string(got) != "mine" {
			t.Fatalf("try %d (exit %d, stderr %q): HOME/.bashrc is %q (%v), want %q untouched", i, code, errs, got, err, "mine")
		}
		got := listing(t, home)
		switch {
		case code != 0 && (code != 1 || !strings.HasPrefix(errs, "error: ")):
			t.Fatalf("try %d: got exit %d stderr %q, want 0, or 1 and error: ...", i, code, errs)
		case got == ".bashrc=mine out.txt=f" && code == 0:
			files++
		case got == ".bashrc=mine out.txt/ out.txt/.bashrc=pwned" && code == 0:
			dirs++
		case got == ".bashrc=mine out.txt/" && code == 0:
			// The directory was listed, then gone before its .bashrc was read.
		case code != 0 && (got == ".bashrc=mine" || got == ".bashrc=mine out.txt/" || got == ".bashrc=mine out.txt/ out.txt/.bashrc=pwned"):
			// The agent's archive broke off in a swap (a directory made,
			// and what came before the break, stays).
			failed++
			t.Logf("try %d: exit 1 stderr %q", i, errs)
		default:
			t.Fatalf("try %d (exit %d, stderr %q): HOME holds %q, want .bashrc and out.txt as the file or the directory", i, code, errs, got)
		}
		if err := os.RemoveAll(filepath.Join(home, "out.txt")); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d copies in %v: %d files, %d directories, %d failed", tries, time.Since(start).Round(time.Millisecond), files, dirs, failed)
	if files == 0 || dirs == 0 {
		t.Fatalf("got %d files and %d directories, want both: the swap did not race the copies", files, dirs)
	}
}

// listing is every path under dir, "name/" for a directory and
// "name=content" for a file, sorted and joined by spaces.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			out = append(out, filepath.ToSlash(rel)+"/")
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel)+"="+string(b))
		default:
			out = append(out, filepath.ToSlash(rel)+"?"+d.Type().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
