//go:build unix

package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	// A stopped server leaves its sandboxes running: each account's are
	// stopped first, the admin's with its key, every other's with a key
	// the admin makes for it (a test's other accounts), then removed.
	s.stopSandboxes(s.Key)
	var accounts struct{ Accounts []struct{ ID string } }
	if s.call(s.Key, http.MethodGet, "/v1/accounts", nil, &accounts) {
		for _, a := range accounts.Accounts {
			var key struct{ ID, Key string }
			body := fmt.Sprintf(`{"account":%q,"name":"testenv-cleanup"}`, a.ID)
			if !s.call(s.Key, http.MethodPost, "/v1/keys", strings.NewReader(body), &key) || key.Key == "" {
				continue
			}
			s.stopSandboxes(key.Key)
			s.call(s.Key, http.MethodDelete, "/v1/keys/"+key.ID, nil, nil)
		}
	}
	s.Stop(false)
}

// stopSandboxes removes every sandbox key's account has that has not
// ended.
func (s *Server) stopSandboxes(key string) {
	var list struct {
		Sandboxes []struct{ ID, State string }
	}
	if !s.call(key, http.MethodGet, "/v1/sandboxes", nil, &list) {
		return
	}
	for _, sb := range list.Sandboxes {
		if sb.State != "ended" {
			s.call(key, http.MethodDelete, "/v1/sandboxes/"+sb.ID, nil, nil)
		}
	}
}

// call makes one API call with key and decodes a 2xx answer into out
// (when not nil), reporting whether it was 2xx.
func (s *Server) call(key, method, path string, body io.Reader, out any) bool {
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return false
	}
	return out == nil || json.NewDecoder(resp.Body).Decode(out) == nil
}
