package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// counterServer is a Python process that holds its state in memory only:
// a token drawn at start and a count of the requests it answered. A
// sandbox started from a snapshot answers with the same token and goes on
// counting from where the snapshot was; a restarted process would not.
const counterServer = `import http.server, os
token = os.urandom(8).hex()
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        n += 1
        b = ("%s %d\n" % (token, n)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("0.0.0.0", 8000), H).serve_forever()
`

// TestSnapshotCLI drives snapshots and forks through the CLI: a snapshot
// and a fork of two go on with a process's memory and serve from the
// same server; each fork's writes, boot id and randomness are its own and
// the source runs on unchanged; snapshot ls, get and rm; and the refusals:
// unknown and other accounts' snapshot ids, fork counts out of range, a
// fork past the account's concurrency (nothing made), a paused sandbox.
func TestSnapshotCLI(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	wr := func(args ...string) string { t.Helper(); return cliOut(t, env, args...) }
	// fails runs a command that must fail with exit 1 and error code.
	fails := func(env []string, code string, args ...string) {
		t.Helper()
		out, errs, got := cli(t, env, args...)
		if got != 1 || !strings.HasPrefix(errs, "error: "+code+": ") || out != "" {
			t.Fatalf("withruntime %s: exit %d stdout %q stderr %q, want exit 1 and error: %s", strings.Join(args, " "), got, out, errs, code)
		}
	}
	sh := func(id, cmd string) string { t.Helper(); return wr("sandbox", "exec", id, "--", "sh", "-c", cmd) }
	// get asks a sandbox's server, from outside, for its token and count.
	get := func(id string) (string, int) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			st, data := call(t, s, s.Key, "GET", "/v1/sandboxes/"+id+"/ports/8000/", nil)
			if st == 200 {
				var tok string
				var n int
				if _, err := fmt.Sscanf(string(data), "%s %d", &tok, &n); err != nil {
					t.Fatalf("%s's server: %q", id, data)
				}
				return tok, n
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's server: %d %s", id, st, data)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	src := strings.TrimSpace(wr("sandbox", "create", "--vcpus", "1", "--memory", "512"))
	script := filepath.Join(t.TempDir(), "srv.py")
	if err := os.WriteFile(script, []byte(counterServer), 0o644); err != nil {
		t.Fatal(err)
	}
	wr("sandbox", "cp", script, src+":/workspace/srv.py")
	wr("sandbox", "exec", "-d", src, "--", "python3", "/workspace/srv.py")
	token, _ := get(src)
	_, count := get(src)

	var snap api.Snapshot
	if err := json.Unmarshal([]byte(wr("sandbox", "snapshot", src, "--name", "before-fork", "--json")), &snap); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(snap.ID, "snap_") || snap.SandboxID != src || snap.Name != "before-fork" || snap.SizeBytes <= 0 || !snap.ExpiresAt.After(snap.CreatedAt) {
		t.Fatalf("the snapshot: %+v", snap)
	}
	t.Logf("snapshot of a 512 MiB sandbox: %d bytes, froze %d ms", snap.SizeBytes, snap.FreezeMs)
	if ls := wr("snapshot", "ls"); !strings.Contains(ls, snap.ID) || !strings.Contains(ls, "before-fork") {
		t.Fatalf("snapshot ls: %q, want %s", ls, snap.ID)
	}
	var got api.Snapshot
	if err := json.Unmarshal([]byte(wr("snapshot", "get", "--json", snap.ID)), &got); err != nil || got.ID != snap.ID || got.SizeBytes != snap.SizeBytes {
		t.Fatalf("snapshot get: %+v %v", got, err)
	}
	if tok, n := get(src); tok != token || n != count+1 {
		t.Fatalf("the source after its snapshot: %s %d, want %s %d", tok, n, token, count+1)
	}
	count++

	forks := strings.Fields(wr("sandbox", "fork", src, "-n", "2"))
	if len(forks) != 2 || forks[0] == forks[1] || forks[0] == src {
		t.Fatalf("sandbox fork -n 2 printed %q", forks)
	}
	boots := map[string]string{sh(src, "cat /proc/sys/kernel/random/boot_id"): src}
	rands := map[string]string{sh(src, "head -c 16 /dev/urandom | od -An -tx1"): src}
	for _, f := range forks {
		if tok, n := get(f); tok != token || n != count+1 {
			t.Fatalf("fork %s's server: %s %d, want the source's process: %s %d", f, tok, n, token, count+1)
		}
		sh(f, "echo "+f+" > /workspace/own.txt")
		for m, v := range map[*map[string]string]string{
			&boots: sh(f, "cat /proc/sys/kernel/random/boot_id"),
			&rands: sh(f, "head -c 16 /dev/urandom | od -An -tx1"),
		} {
			if other, dup := (*m)[v]; dup {
				t.Fatalf("fork %s and %s read the same %q", f, other, v)
			}
			(*m)[v] = f
		}
	}
	for _, f := range forks {
		if out := sh(f, "cat /workspace/own.txt"); out != f+"\n" {
			t.Fatalf("fork %s reads %q from its own file", f, out)
		}
	}
	if out := sh(src, "ls /workspace"); out != "srv.py\n" {
		t.Fatalf("the source after the forks: %q", out)
	}
	if tok, n := get(src); tok != token || n != count+1 {
		t.Fatalf("the source's server after the forks: %s %d, want %s %d", tok, n, token, count+1)
	}
	if ls := wr("snapshot", "ls", "--json"); strings.Count(ls, `"id"`) != 1 {
		t.Fatalf("a fork without --keep-snapshot left a snapshot: %s", ls)
	}

	var kept api.ForkResult
	if err := json.Unmarshal([]byte(wr("sandbox", "fork", forks[0], "--keep-snapshot", "--json")), &kept); err != nil || len(kept.Sandboxes) != 1 || kept.Snapshot == nil || kept.Snapshot.SandboxID != forks[0] {
		t.Fatalf("fork --keep-snapshot --json: %+v %v", kept, err)
	}
	wr("sandbox", "stop", kept.Sandboxes[0].ID, forks[1])

	// A sandbox started from the snapshot goes on from it too.
	from := strings.TrimSpace(wr("sandbox", "create", "--snapshot", snap.ID, "--timeout", "120"))
	if tok, n := get(from); tok != token || n != count {
		t.Fatalf("a sandbox from the snapshot: %s %d, want %s %d", tok, n, token, count)
	}
	var fromSb api.Sandbox
	if err := json.Unmarshal([]byte(wr("sandbox", "get", "--json", from)), &fromSb); err != nil || fromSb.MemoryMiB != 512 || fromSb.VCPUs != 1 {
		t.Fatalf("a sandbox from the snapshot takes its size: %+v %v", fromSb, err)
	}
	wr("sandbox", "stop", from)

	// Unknown and other accounts' snapshots are not found alike.
	newAccount(t, s, `{"name":"other"}`)
	stranger := append(os.Environ(), "WITHRUNTIME_BASE_URL="+s.URL, "WITHRUNTIME_API_KEY="+newKey(t, s, `{"account":"other"}`).Secret)
	for _, c := range []struct {
		env []string
		id  string
	}{{env, "snap_00000000000000000000000000000000"}, {stranger, snap.ID}} {
		e, id := c.env, c.id
		fails(e, "not_found", "snapshot", "get", id)
		fails(e, "not_found", "snapshot", "rm", id)
		fails(e, "not_found", "sandbox", "create", "--snapshot", id)
	}
	if ls := strings.TrimSpace(cliOut(t, stranger, "snapshot", "ls")); strings.Contains(ls, "snap_") {
		t.Fatalf("another account's snapshot ls: %q", ls)
	}
	fails(stranger, "not_found", "sandbox", "snapshot", src)
	fails(stranger, "not_found", "sandbox", "fork", src)

	fails(env, "invalid_request", "sandbox", "fork", src, "-n", "0")
	fails(env, "invalid_request", "sandbox", "fork", src, "-n", "17")

	// Past the account's concurrency: nothing made.
	newAccount(t, s, `{"name":"small","concurrency":2}`)
	small := append(os.Environ(), "WITHRUNTIME_BASE_URL="+s.URL, "WITHRUNTIME_API_KEY="+newKey(t, s, `{"account":"small"}`).Secret)
	one := strings.TrimSpace(cliOut(t, small, "sandbox", "create", "--vcpus", "1", "--memory", "512"))
	fails(small, "concurrency_limit_reached", "sandbox", "fork", one, "-n", "2")
	if ls := cliOut(t, small, "sandbox", "ls", "-a", "--json"); strings.Count(ls, `"id"`) != 1 {
		t.Fatalf("a refused fork made sandboxes: %s", ls)
	}
	if ls := cliOut(t, small, "snapshot", "ls", "--json"); strings.Contains(ls, "snap_") {
		t.Fatalf("a refused fork left a snapshot: %s", ls)
	}
	ids := strings.Fields(cliOut(t, small, "sandbox", "fork", one))
	if len(ids) != 1 {
		t.Fatalf("a fork within the concurrency: %q", ids)
	}
	// Stopping the server leaves its sandboxes running: the test stops
	// its own.
	cliOut(t, small, "sandbox", "stop", one, ids[0])

	// A paused sandbox is neither snapshotted nor forked.
	wr("sandbox", "pause", src)
	fails(env, "conflict", "sandbox", "snapshot", src)
	fails(env, "conflict", "sandbox", "fork", src)

	if out := wr("snapshot", "rm", snap.ID, kept.Snapshot.ID); out != snap.ID+"\n"+kept.Snapshot.ID+"\n" {
		t.Fatalf("snapshot rm printed %q", out)
	}
	fails(env, "not_found", "snapshot", "get", snap.ID)
	if ls := wr("snapshot", "ls", "--json"); strings.Contains(ls, "snap_") {
		t.Fatalf("snapshot ls after rm: %s", ls)
	}
	if out := sh(forks[0], "echo alive"); out != "alive\n" {
		t.Fatalf("a fork after its snapshot is removed: %q", out)
	}
	wr("sandbox", "stop", forks[0], src)
}

// cliOut runs the CLI with env and returns its stdout; it must succeed.
func cliOut(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, errs, code := cli(t, env, args...)
	if code != 0 {
		t.Fatalf("withruntime %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}
