package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// echoServer is a threaded TCP echo on the sandbox's 127.0.0.1:7000.
const echoServer = `import socketserver
class H(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            b = self.request.recv(65536)
            if not b:
                return
            self.request.sendall(b)
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("127.0.0.1", 7000), H).serve_forever()
`

// portForward is a running "withruntime sandbox port-forward".
type portForward struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	local  map[int]string // remote port -> local address
	done   chan struct{}
}

func (p *portForward) errors() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

var forwardingRe = regexp.MustCompile(`^Forwarding from (127\.0\.0\.1:\d+) -> (\d+)$`)

// startPortForward runs the CLI with args after "sandbox port-forward" and
// waits for its n "Forwarding from" lines.
func startPortForward(t *testing.T, env []string, n int, args ...string) *portForward {
	t.Helper()
	p := &portForward{local: map[int]string{}, done: make(chan struct{})}
	p.cmd = exec.Command(testenv.CLI(t), append([]string{"sandbox", "port-forward"}, args...)...)
	p.cmd.Env = env
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		p.cmd.Wait()
		close(p.done)
	}()
	for len(p.local) < n {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("port-forward ended before it listened: %s", p.errors())
			}
			m := forwardingRe.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("port-forward printed %q, want Forwarding from 127.0.0.1:PORT -> REMOTE", line)
			}
			var remote int
			fmt.Sscan(m[2], &remote)
			p.local[remote] = m[1]
		case <-time.After(30 * time.Second):
			t.Fatalf("port-forward printed no Forwarding line in 30s: %s", p.errors())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return p
}

// wait waits for the CLI to exit and returns its exit code.
func (p *portForward) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("port-forward did not exit in %s; stderr: %s", d, p.errors())
		return 0
	}
}

// echo sends size random bytes through addr and checks that the same
// come back.
func echo(addr string, size int) error {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	want := make([]byte, size)
	rand.Read(want)
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(want)
		werr <- err
	}()
	got := make([]byte, size)
	if _, err := io.ReadFull(conn, got); err != nil {
		return fmt.Errorf("reading the echo: %w", err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("the echo of %d bytes differs from what was sent", size)
	}
	return nil
}

// TestPortForwardCLI forwards local ports to a TCP echo and to python's
// http.server in a real sandbox with "withruntime sandbox port-forward",
// and talks to them with real TCP and HTTP clients: several connections at
// once, a refused remote port that ends only its own connection, a paused
// sandbox, Ctrl-C, and a sandbox that ends.
func TestPortForwardCLI(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "1024", "--timeout", "15m")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errs)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { cli(t, env, "sandbox", "stop", id) })
	if _, errs, code := cli(t, env, "sandbox", "exec", id, "--", "sh", "-c",
		"mkdir -p /tmp/www && echo forwarded-page-$((6*7)) > /tmp/www/index.html"); code != 0 {
		t.Fatalf("exec: exit %d: %s", code, errs)
	}
	for _, argv := range [][]string{
		{"python3", "-c", echoServer},
		{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/tmp/www"},
	} {
		if _, errs, code := cli(t, env, append([]string{"sandbox", "exec", "-d", id, "--"}, argv...)...); code != 0 {
			t.Fatalf("exec -d %v: exit %d: %s", argv, code, errs)
		}
	}

	// The echo on a free local port, http.server on another, and port 9,
	// where nothing listens.
	pf := startPortForward(t, env, 3, id, ":7000", "0:8000", ":9")
	echoAddr := pf.local[7000]

	// The servers take a moment to listen: until then the forwarder
	// closes each connection with an error.
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := echo(echoAddr, 10)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the echo never answered through the forward: %v; port-forward said: %s", err, pf.errors())
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("several connections at once", func(t *testing.T) {
		var wg sync.WaitGroup
		// From one byte to 3 MiB (many WebSocket messages), all at once.
		sizes := []int{1, 100, 4096, 32 << 10, 32<<10 + 1, 200 << 10, 1 << 20, 3 << 20}
		errc := make(chan error, len(sizes))
		for _, size := range sizes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errc <- echo(echoAddr, size)
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			if err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("http.server", func(t *testing.T) {
		var resp *http.Response
		var err error
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			resp, err = http.Get("http://" + pf.local[8000] + "/index.html")
			if err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("GET through the forward: %v; port-forward said: %s", err, pf.errors())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "forwarded-page-42\n" {
			t.Fatalf("GET through the forward: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("a refused port ends its connection only", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", pf.local[9], 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		n, err := conn.Read(make([]byte, 1))
		conn.Close()
		if n != 0 || (err != io.EOF && !errorIsReset(err)) {
			t.Fatalf("reading from the refused forward: %d bytes, %v; want the connection closed", n, err)
		}
		wantErr := regexp.MustCompile(`error: bad_gateway: connection from 127\.0\.0\.1:\d+ to port 9 of ` + regexp.QuoteMeta(id) + `: .+`)
		for deadline := time.Now().Add(10 * time.Second); !wantErr.MatchString(pf.errors()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("port-forward's stderr %q does not match %s", pf.errors(), wantErr)
			}
		}
		// The forwarder goes on.
		if err := echo(echoAddr, 64<<10); err != nil {
			t.Fatalf("after the refusal: %v", err)
		}
		select {
		case <-pf.done:
			t.Fatalf("port-forward exited after a refused connection: %s", pf.errors())
		default:
		}
	})

	t.Run("a paused sandbox", func(t *testing.T) {
		if _, errs, code := cli(t, env, "sandbox", "pause", id); code != 0 {
			t.Fatalf("pause: exit %d: %s", code, errs)
		}
		// Refused (conflict) connection by connection; the forwarding goes
		// on, and works again once the sandbox is resumed.
		if err := echo(echoAddr, 100); err == nil {
			t.Fatal("the echo answered through the forward of a paused sandbox")
		}
		wantErr := regexp.MustCompile(`error: conflict: connection from 127\.0\.0\.1:\d+ to port 7000 of ` + regexp.QuoteMeta(id) + `: .+`)
		for deadline := time.Now().Add(10 * time.Second); !wantErr.MatchString(pf.errors()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("port-forward's stderr %q does not match %s", pf.errors(), wantErr)
			}
		}
		if _, errs, code := cli(t, env, "sandbox", "resume", id); code != 0 {
			t.Fatalf("resume: exit %d: %s", code, errs)
		}
		if err := echo(echoAddr, 64<<10); err != nil {
			t.Fatalf("after the resume: %v; port-forward said: %s", err, pf.errors())
		}
	})

	t.Run("Ctrl-C", func(t *testing.T) {
		pf.cmd.Process.Signal(syscall.SIGINT)
		if code := pf.wait(t, 20*time.Second); code != 130 {
			t.Fatalf("port-forward exited %d after SIGINT, want 130; stderr: %s", code, pf.errors())
		}
		if _, err := net.DialTimeout("tcp", echoAddr, 2*time.Second); err == nil {
			t.Fatal("the local port still accepts connections after port-forward ended")
		}
	})

	t.Run("the sandbox ends", func(t *testing.T) {
		pf := startPortForward(t, env, 1, id, ":7000")
		if err := echo(pf.local[7000], 100); err != nil {
			t.Fatal(err)
		}
		if _, errs, code := cli(t, env, "sandbox", "stop", id); code != 0 {
			t.Fatalf("stop: exit %d: %s", code, errs)
		}
		// The next connection finds it gone: the forwarding ends.
		if err := echo(pf.local[7000], 100); err == nil {
			t.Fatal("the echo answered through the forward of a stopped sandbox")
		}
		if code := pf.wait(t, 20*time.Second); code != 1 || !strings.Contains(pf.errors(), "error: not_found: ") {
			t.Fatalf("port-forward exited %d with %q after its sandbox ended, want 1 and not_found", code, pf.errors())
		}
		// And it does not start for an ended sandbox.
		out, errs, code := cli(t, env, "sandbox", "port-forward", id, ":7000")
		if code != 1 || out != "" || !strings.HasPrefix(errs, "error: not_found: sandbox "+id+" has ended (stopped)") {
			t.Fatalf("port-forward of an ended sandbox: exit %d stdout %q stderr %q", code, out, errs)
		}
	})
}

func errorIsReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}
