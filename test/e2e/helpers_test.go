// Package e2e tests withruntime from the outside: a real `withruntime
// serve` process, the real CLI binary and plain HTTP clients.
package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// cli runs the withruntime binary with env and returns stdout, stderr and
// the exit code.
func cli(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testenv.CLI(t), args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running withruntime %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// call makes one API request with the given key and returns the status and
// the body.
func call(t *testing.T, s *testenv.Server, key, method, path string, body io.Reader) (int, []byte) {
	t.Helper()
	// Not t.Context(): cleanups call this after the test's context ended.
	req, err := http.NewRequestWithContext(context.Background(), method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// errorCode reads the stable code of an error body.
func errorCode(body []byte) string {
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(body, &e)
	return e.Error.Code
}

// runDir is where the server keeps runtime state for its data dir.
func runDir(dataDir string) string {
	abs, _ := filepath.Abs(dataDir)
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join("/run/withruntime", hex.EncodeToString(sum[:])[:12])
}

// leftovers lists what sandboxes of dataDir still hold on the host:
// sandbox processes, mounts and cgroups.
func leftovers(t *testing.T, dataDir string, ids []string) []string {
	t.Helper()
	var found []string
	rd := runDir(dataDir)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		if bytes.Contains(data, []byte(rd)) || bytes.Contains(data, []byte(dataDir+"/sandboxes")) {
			found = append(found, "process "+strings.ReplaceAll(string(data[:min(len(data), 80)]), "\x00", " "))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		// runsc's own empty namespace for gofers is shared by every
		// sandbox of the data dir, not a sandbox's.
		if strings.Contains(line, rd) && !strings.Contains(line, "/runsc/null-netns") {
			found = append(found, "mount "+line)
		}
	}
	for _, id := range ids {
		// v1 hierarchies, and the unified tree of a pure v2 host.
		cg, _ := filepath.Glob("/sys/fs/cgroup/*/withruntime/" + id)
		if _, err := os.Stat("/sys/fs/cgroup/withruntime/" + id); err == nil {
			cg = append(cg, "/sys/fs/cgroup/withruntime/"+id)
		}
		for _, c := range cg {
			found = append(found, "cgroup "+c)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", id)); err == nil {
			found = append(found, "state dir of "+id)
		}
		if _, err := os.Stat(filepath.Join(rd, id)); err == nil {
			found = append(found, "run dir of "+id)
		}
	}
	return found
}
