// Package e2e tests withruntime from the outside: a real `withruntime
// serve` process, the real CLI binary and plain HTTP clients.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
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

// runDir is where the server's gVisor backend keeps runtime state for its
// data dir, and vmRunDir its microVM backend's.
func runDir(dataDir string) string   { return hashedRunDir("/run/withruntime", dataDir) }
func vmRunDir(dataDir string) string { return hashedRunDir("/run/withruntime-vm", dataDir) }

func hashedRunDir(root, dataDir string) string {
	abs, _ := filepath.Abs(dataDir)
	return sandbox.RunDir(root, abs)
}

// pidFile is where a running sandbox of either isolation records the pid
// of what holds it: runsc's sandbox process, or QEMU.
func pidFile(dataDir, isolation, id string) string {
	if isolation == "microvm" {
		return filepath.Join(vmRunDir(dataDir), id, "qemu.pid")
	}
	return filepath.Join(runDir(dataDir), id, "pid")
}

// leftovers lists what sandboxes of dataDir, of either isolation, still
// hold on the host: processes, mounts, cgroups, state and run dirs.
func leftovers(t *testing.T, dataDir string, ids []string) []string {
	t.Helper()
	var found []string
	rd, vd := runDir(dataDir), vmRunDir(dataDir)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		mine := bytes.Contains(data, []byte(rd)) || bytes.Contains(data, []byte(dataDir+"/sandboxes"))
		for _, id := range ids {
			// QEMU's arguments name paths inside its jail, and the VM.
			mine = mine || bytes.Contains(data, []byte("\x00wr-"+id+"\x00"))
		}
		if mine {
			found = append(found, "process "+strings.ReplaceAll(string(data[:min(len(data), 80)]), "\x00", " "))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		// runsc's own empty namespace for gofers is shared by every
		// sandbox of the data dir, not a sandbox's.
		if (strings.Contains(line, rd) && !strings.Contains(line, "/runsc/null-netns")) || strings.Contains(line, vd+"/") {
			found = append(found, "mount "+line)
		}
	}
	for _, id := range ids {
		// v1 hierarchies, and the unified tree of a pure v2 host.
		var cg []string
		for _, parent := range []string{"withruntime", "withruntime-vm"} {
			v1, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent + "/" + id)
			cg = append(cg, v1...)
			if _, err := os.Stat("/sys/fs/cgroup/" + parent + "/" + id); err == nil {
				cg = append(cg, "/sys/fs/cgroup/"+parent+"/"+id)
			}
		}
		for _, c := range cg {
			found = append(found, "cgroup "+c)
		}
		for _, dir := range []string{filepath.Join(dataDir, "sandboxes", id), filepath.Join(dataDir, "microvm", id)} {
			if _, err := os.Stat(dir); err == nil {
				found = append(found, "state dir "+dir)
			}
		}
		for _, dir := range []string{filepath.Join(rd, id), filepath.Join(vd, id)} {
			if _, err := os.Stat(dir); err == nil {
				found = append(found, "run dir "+dir)
			}
		}
	}
	return found
}
