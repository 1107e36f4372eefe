package agentlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports: the link ships in every sandbox's agent, so it imports
// little: yamux only multiplexes a microVM's one port, x/time/rate bounds
// the guest's pings, and the shared backoff is standard library only. The
// API's types are the agent's own already (its reseed's request and
// answer are among them).
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("api", "golang.org/x/sys/unix", "github.com/hashicorp/yamux", "golang.org/x/time/rate", "internal/backoff"))
}

// countingDialer dials path and counts the agent's connections still open.
type countingDialer struct {
	path string
	open atomic.Int64
}

type countedConn struct {
	net.Conn
	d    *countingDialer
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.d.open.Add(-1) })
	return c.Conn.Close()
}

func (d *countingDialer) dial(ctx context.Context) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "unix", d.path)
	if err != nil {
		return nil, err
	}
	d.open.Add(1)
	return &countedConn{Conn: c, d: d}, nil
}

type rig struct {
	dir     *Dir
	host    *Host
	dialer  *countingDialer
	resumed chan struct{}
	runErr  chan error
	cancel  context.CancelFunc
}

func newRig(t *testing.T) *rig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sock")
	dir, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	host, err := dir.Listen()
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{dir: dir, host: host, dialer: &countingDialer{path: filepath.Join(path, SockName)}, resumed: make(chan struct{}, 1), runErr: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /echo", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Query().Get("v")) })
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	})
	a := &Agent{Dial: r.dialer.dial, Handler: mux, WaitResume: func(ctx context.Context) error {
		select {
		case <-r.resumed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.runErr <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.runErr
		r.host.Close()
		dir.Close()
	})
	return r
}

func (r *rig) client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return r.host.Dial(ctx) },
	}}
}

func get(t *testing.T, c *http.Client, path string) string {
	t.Helper()
	resp, err := c.Get("http://agent" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestRequestsParallel(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := r.host.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	c := r.client()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprint(i)
			resp, err := c.Get("http://agent/echo?v=" + want)
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != want {
				errs <- fmt.Errorf("got %q, want %q", b, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestSuspendReleasesEverything: after Suspend returns, the agent holds no
// connection at all (a checkpoint would fail on one), dials nothing until
// resumed, and serves again afterwards on a new listener.
func TestSuspendReleasesEverything(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := r.host.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	c := r.client()
	// A request in flight during the suspend must not keep its connection.
	go c.Get("http://agent/slow")
	time.Sleep(50 * time.Millisecond)
	if err := r.host.Suspend(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.dialer.open.Load(); n != 0 {
		t.Fatalf("agent holds %d connections after the suspend, want 0", n)
	}
	// A new listener (as after a restore), but no resume yet: nothing dials.
	host, err := r.dir.Listen()
	if err != nil {
		t.Fatal(err)
	}
	r.host = host
	time.Sleep(100 * time.Millisecond)
	if n := r.dialer.open.Load(); n != 0 {
		t.Fatalf("suspended agent dialed %d connections, want 0", n)
	}
	r.resumed <- struct{}{}
	if err := host.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(t, r.client(), "/echo?v=back"); got != "back" {
		t.Fatalf("got %q after resume, want %q", got, "back")
	}
}

// TestAgentRedialsAfterHostRestart: a new server process listens anew and
// the agent finds it.
func TestAgentRedialsAfterHostRestart(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := r.host.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	r.host.Close()
	host, err := r.dir.Listen()
	if err != nil {
		t.Fatal(err)
	}
	r.host = host
	if got := get(t, r.client(), "/echo?v=again"); got != "again" {
		t.Fatalf("got %q, want %q", got, "again")
	}
}

// TestHostBoundsAHostileAgent: connections that speak first are dropped,
// spares beyond the bound are closed, and Close closes the connections in
// use.
func TestHostBoundsAHostileAgent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sock")
	dir, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	host, err := dir.Listen()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(path, SockName)
	var conns []net.Conn
	for range 3 * maxSpares {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		c.Write([]byte("HTTP/1.1 200 OK\r\n")) // speaks before the host
	}
	// Beyond maxSpares the host closes what it accepts.
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		var ne net.Error
		if _, err := c.Read(make([]byte, 1)); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			closed++ // EOF, or a reset: the host never read what it sent
		}
	}
	if closed < 2*maxSpares {
		t.Errorf("host closed %d of %d extra connections, want at least %d", closed, 3*maxSpares, 2*maxSpares)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if c, err := host.Dial(ctx); err == nil {
		t.Fatalf("Dial handed out %v, a connection that spoke first", c.RemoteAddr())
	}
	// One honest connection, taken into use, then Close.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hc, err := host.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != opHTTP {
		t.Fatalf("got %q, %v; want the op byte %q", b, err, opHTTP)
	}
	host.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(b); !errors.Is(err, io.EOF) {
		t.Fatalf("connection in use after Close: got %v, want EOF", err)
	}
	if _, err := host.Dial(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial after Close: got %v, want ErrClosed", err)
	}
	for _, c := range conns {
		c.Close()
	}
}

// flakyListener fails Accept with EMFILE a few times.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestAcceptSurvivesEMFILE(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: l}
	fl.fails.Store(5)
	host := Serve(fl)
	defer host.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	hc, err := host.Dial(ctx)
	if err != nil {
		t.Fatalf("after EMFILE: %v", err)
	}
	hc.Close()
}

// TestDirNeverFollows: whatever sits at the socket's or the flag's name
// (a symlink to a canary, say) is replaced, never followed.
func TestDirNeverFollows(t *testing.T) {
	tmp := t.TempDir()
	canary := filepath.Join(tmp, "canary")
	if err := os.WriteFile(canary, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tmp, "sock")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{SockName, ResumeName} {
		if err := os.Symlink(canary, filepath.Join(path, name)); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	host, err := dir.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if err := dir.SetResume(); err != nil {
		t.Fatal(err)
	}
	if err := dir.ClearResume(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(canary); string(got) != "keep" {
		t.Fatalf("canary now %q, want %q", got, "keep")
	}
	if fi, err := os.Lstat(filepath.Join(path, SockName)); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket entry: %v, %v; want a socket", fi, err)
	}
	// A symlinked directory itself is refused.
	link := filepath.Join(tmp, "linkdir")
	os.Symlink(path, link)
	if d, err := OpenDir(link); err == nil {
		d.Close()
		t.Fatal("OpenDir followed a symlink")
	}
}
