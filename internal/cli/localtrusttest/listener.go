// Package localtrusttest runs another user's listener for the tests of
// whom clients trust with the local daemon's admin key: an HTTP server on
// a loopback port, its socket owned by a uid other than the test's, that
// answers every request with 200 and records each Authorization header.
// The test binary serves it, started again under that uid (Main must run
// first in the package's TestMain).
//
// Only tests import it; it needs root (to start a process as another uid).
package localtrusttest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// envServe, set to "1", makes Main serve instead of running the tests.
const envServe = "WITHRUNTIME_TEST_FOREIGN_LISTENER"

// Nobody is the uid tests run the foreign listener as.
const Nobody = 65534

// Main serves as the listener when the test binary was started for it
// (and then never returns); otherwise it returns at once.
func Main() {
	if os.Getenv(envServe) != "1" {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "listening %s\n", l.Addr())
	out.Flush()
	http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Fprintf(out, "auth %q\n", r.Header.Get("Authorization"))
		out.Flush()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok","sandboxes":[]}`)
	}))
	os.Exit(1)
}

// Listener is the server Start runs.
type Listener struct {
	URL  string // http://127.0.0.1:PORT
	Addr string // 127.0.0.1:PORT
	Pid  int

	mu   sync.Mutex
	auth []string // the Authorization header of each request, "" when none
}

// Start runs the listener as uid (with uid's gid). The test binary is
// copied where uid can run it.
func Start(t *testing.T, uid int) *Listener {
	t.Helper()
	testenv.RequiresRoot(t) // to start a process as another user
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "wr-foreign-listener-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "listener")
	if err := copyFile(bin, exe); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), envServe+"=1")
	cmd.Dir = "/"
	asUser(t, cmd, uid)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the listener as uid %d: %v", uid, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	l := &Listener{Pid: cmd.Process.Pid}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			word, rest, _ := strings.Cut(sc.Text(), " ")
			switch word {
			case "listening":
				ready <- rest
			case "auth":
				h, _ := strconv.Unquote(rest)
				l.mu.Lock()
				l.auth = append(l.auth, h)
				l.mu.Unlock()
			}
		}
		close(ready)
	}()
	select {
	case addr, ok := <-ready:
		if !ok {
			t.Fatal("the listener exited before listening")
		}
		l.Addr, l.URL = addr, "http://"+addr
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not start in 10 s")
	}
	return l
}

// Auth returns the Authorization header of each request so far.
func (l *Listener) Auth() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.auth...)
}

// Keyed waits a moment for requests still in flight and returns the
// Authorization headers that were not empty.
func (l *Listener) Keyed() []string {
	time.Sleep(50 * time.Millisecond)
	var keyed []string
	for _, a := range l.Auth() {
		if a != "" {
			keyed = append(keyed, a)
		}
	}
	return keyed
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
