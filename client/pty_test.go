//go:build linux

package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/agent"
)

// newAgentClient is a client of a real agent serving sandbox "sbx" (the
// agent's routes are the sandbox routes without their prefix), running
// commands as the test's user.
func newAgentClient(t *testing.T) *Client {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.UID, cfg.GID = os.Getuid(), os.Getgid()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace, cfg.Home = ws, ws
	cfg.BaseEnv["HOME"] = ws
	a := agent.New(cfg)
	t.Cleanup(a.Close)
	return newTestClient(t, http.StripPrefix("/v1/sandboxes/sbx", a))
}

// syncBuffer collects a PTY's output as it is read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(s.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %q, got %q", want, s.String())
		}
	}
}

func TestOpenPTY(t *testing.T) {
	c := newAgentClient(t)
	ctx := t.Context()
	p, err := c.OpenPTY(ctx, "sbx", PTYOptions{Cmd: []string{"sh"}, Cols: 90, Rows: 20, Env: map[string]string{"K": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	copied := make(chan error, 1)
	go func() { _, err := io.Copy(&out, p); copied <- err }()
	p.Write([]byte("stty size; echo K=$K\n"))
	out.waitFor(t, "K=v")
	if !strings.Contains(out.String(), "20 90") {
		t.Fatalf("got %q, want the size 20 90", out.String())
	}
	if err := p.Resize(ctx, 100, 33); err != nil {
		t.Fatal(err)
	}
	p.Write([]byte("stty size\n"))
	out.waitFor(t, "33 100")

	// Let go, attach again: the kept output comes first, and the
	// terminal still runs.
	p.Close()
	<-copied
	q, err := c.OpenPTY(ctx, "sbx", PTYOptions{Attach: p.Pid()})
	if err != nil {
		t.Fatal(err)
	}
	var again syncBuffer
	go io.Copy(&again, q)
	again.waitFor(t, "K=v")
	q.Write([]byte("exit 5\n"))
	code, err := q.Wait(ctx)
	if err != nil || code != 5 {
		t.Fatalf("got exit %d, %v, want 5", code, err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, ErrPTYClosed) {
		t.Fatalf("the closed PTY's Wait got %v, want ErrPTYClosed", err)
	}

	// A command that cannot start: its reason, then 127.
	r, err := c.OpenPTY(ctx, "sbx", PTYOptions{Cmd: []string{"no-such-command-here"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	code, err = r.Wait(ctx)
	if err != nil || code != 127 || !strings.Contains(string(b), "not found") {
		t.Fatalf("got %q, exit %d, %v; want not found and 127", b, code, err)
	}

	// Kill ends a terminal: 137, SIGKILL's.
	k, err := c.OpenPTY(ctx, "sbx", PTYOptions{Cmd: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, k)
	if err := k.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if code, err := k.Wait(wctx); err != nil || code != 137 {
		t.Fatalf("got exit %d, %v after Kill, want 137", code, err)
	}
}
