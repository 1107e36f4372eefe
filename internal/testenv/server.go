//go:build unix

package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a real `withruntime serve` process. (Unix only, for its
// process group: the rest of the package builds everywhere, so that the
// client's import fence vets on Windows.)
type Server struct {
	URL     string
	Key     string
	DataDir string
	Addr    string
	cmd     *exec.Cmd
	Log     *strings.Builder
	t       testing.TB
	args    []string
}

// StartServer runs the CLI's serve command on a free loopback port with a
// fresh data dir, and waits until it answers. It is killed at the end of
// the test. Unless extra says --pool, the server keeps no warm pool: most
// tests count sandboxes, processes or admission room, and two spare boots
// per server would cost the suite's two cores for nothing; the pool's
// own tests ask for one.
func StartServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	RequiresGvisor(t)
	if !slices.Contains(extra, "--pool") {
		extra = append([]string{"--pool", "none"}, extra...)
	}
	addr := FreeAddr(t)
	s := &Server{URL: "http://" + addr, Addr: addr, DataDir: t.TempDir(), t: t, args: extra}
	s.Start()
	t.Cleanup(s.cleanup)
	return s
}

// FreeAddr is a loopback address (host:port) no listener has now, for a
// process the test starts to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start starts (or restarts) the server process on the same data dir.
func (s *Server) Start() {
	t := s.t
	t.Helper()
	args := append([]string{"serve", "--listen", s.Addr, "--data-dir", s.DataDir, "--cache-dir", CacheDir()}, s.args...)
	s.cmd = exec.Command(CLI(t), args...)
	s.Log = &strings.Builder{}
	pr, pw, _ := os.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	logb := s.Log
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logb.WriteString(sc.Text() + "\n")
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		resp, err := http.Get(s.URL + "/v1/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("server did not answer: %v\n%s", err, s.Log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	key, err := os.ReadFile(filepath.Join(s.DataDir, "admin.key"))
	if err != nil {
		t.Fatalf("reading admin key: %v", err)
	}
	s.Key = strings.TrimSpace(string(key))
}

// Stop ends the server: with SIGKILL when hard (a crash), else SIGTERM.
func (s *Server) Stop(hard bool) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-s.cmd.Process.Pid, sig)
	s.cmd.Wait()
	s.cmd = nil
}

// Pid is the server process's pid (0 when it is stopped).
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Env is the client environment for this server.
func (s *Server) Env() []string {
	return append(os.Environ(), "WITHRUNTIME_BASE_URL="+s.URL, "WITHRUNTIME_API_KEY="+s.Key)
}

func (s *Server) String() string { return fmt.Sprintf("server %s (%s)", s.URL, s.DataDir) }

// cleanup stops every sandbox of the server, so that none outlives the
// test (the data dir goes with it), then stops the server.
func (s *Server) cleanup() {
	if s.cmd == nil {
		return
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+s.Key)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		var list struct {
			Sandboxes []struct{ ID, State string }
		}
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		for _, sb := range list.Sandboxes {
			if sb.State == "ended" {
				continue
			}
			del, _ := http.NewRequest(http.MethodDelete, s.URL+"/v1/sandboxes/"+sb.ID, nil)
			del.Header.Set("Authorization", "Bearer "+s.Key)
			if r, err := http.DefaultClient.Do(del); err == nil {
				r.Body.Close()
			}
		}
	}
	s.Stop(false)
}
