package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/testenv"
)

// proc is one process of the rig: the CLI with args, in network namespace
// ns ("" for the root one). Its output goes to a log file that outlives
// restarts.
type proc struct {
	name    string
	ns      string
	args    []string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

func (r *rig) newProc(name, ns string, args ...string) *proc {
	return &proc{name: name, ns: ns, args: args, logPath: filepath.Join(r.dir, name+".log")}
}

// start runs the process. A node runs under nsenter --net: only its
// network namespace is the node's own. (`ip netns exec` would also give it
// a mount namespace with a fresh /sys, without the host's cgroup
// hierarchies that runsc and the meter need.)
func (p *proc) start(t testing.TB) {
	t.Helper()
	name, args := testenv.CLI(t), p.args
	if p.ns != "" {
		name, args = "nsenter", append([]string{"--net=/run/netns/" + p.ns, "--", testenv.CLI(t)}, p.args...)
	}
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(p.done)
}

// exited reports whether the process has ended (or never started).
func (p *proc) exited() bool {
	if p.cmd == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill9 kills the process alone with SIGKILL, as a crash would: what it
// started (sandboxes) stays.
func (p *proc) kill9() {
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop ends the process and its group: SIGTERM, SIGKILL after 15 s.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// tail is the last 60 lines of the process's log.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	return strings.Join(lines, "\n")
}

// runDir is where a node keeps runtime state for its data dir (the gVisor
// backend's default: /run/withruntime/<hash of the data dir>).
func runDir(dataDir string) string {
	abs, _ := filepath.Abs(dataDir)
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join("/run/withruntime", hex.EncodeToString(sum[:])[:12])
}

type container struct {
	id     string
	pid    int
	status string // runsc's: running, paused, stopped...
}

// runscList is what runsc knows of a node's containers (none when its
// state root is gone).
func runscList(runsc, run, ns string) []container {
	root := filepath.Join(run, "runsc")
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	cmd := exec.Command(runsc, "--root", root, "list", "-format", "json")
	if ns != "" {
		cmd = exec.Command("nsenter", "--net=/run/netns/"+ns, "--", runsc, "--root", root, "list", "-format", "json")
	}
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var list []struct {
		ID     string `json:"id"`
		Pid    int    `json:"pid"`
		Status string `json:"status"`
	}
	json.Unmarshal(bytes.TrimSpace(out), &list)
	var cs []container
	for _, c := range list {
		cs = append(cs, container{c.ID, c.Pid, c.Status})
	}
	return cs
}

// runscStatus is runsc's status of container id on node n ("" when it
// lists none).
func runscStatus(n *node, id string) string {
	runsc := filepath.Join(testenv.CacheDir(), "bin", "runsc")
	for _, c := range runscList(runsc, runDir(n.dataDir), n.ns) {
		if c.id == id {
			return c.status
		}
	}
	return ""
}

// runscHas reports whether runsc on node n still lists container id.
func runscHas(n *node, id string) bool {
	runsc := filepath.Join(testenv.CacheDir(), "bin", "runsc")
	return slices.ContainsFunc(runscList(runsc, runDir(n.dataDir), n.ns), func(c container) bool { return c.id == id })
}

func syscallKill(pid int) { unix.Kill(pid, unix.SIGKILL) }

// removeCgroups removes a sandbox's cgroups, deepest first, in every
// hierarchy.
func removeCgroups(id string) {
	var dirs []string
	for _, pat := range []string{"/sys/fs/cgroup/withruntime/" + id, "/sys/fs/cgroup/*/withruntime/" + id} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		var sub []string
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				sub = append(sub, p)
			}
			return nil
		})
		for i := len(sub) - 1; i >= 0; i-- {
			unix.Rmdir(sub[i])
		}
	}
}

// unmountUnder detaches every mount under dir, deepest first.
func unmountUnder(dir string) {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		unix.Unmount(points[i], unix.MNT_DETACH)
	}
}

func osLookPath(name string) (string, error) { return exec.LookPath(name) }
