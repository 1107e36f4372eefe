package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestSlowClients floods a real server from loopback, the address its
// health check comes from too, with more clients dribbling request
// headers than the server has connections or even descriptors for.
// Health and exec must answer through the flood, the server must hold no
// more connections than --max-conns, and all must work after.
func TestSlowClients(t *testing.T) {
	const (
		maxConns = 1000
		flood    = 5000
		// serverFiles is the server's descriptor limit during the flood:
		// below the flood, so that holding every client would exhaust it,
		// as the attack did at 21,000 clients on a 20,000-descriptor host.
		serverFiles = 3000
	)
	raiseFiles(t, flood+1000)
	s := testenv.StartServer(t, "--max-conns", strconv.Itoa(maxConns))
	pid := serverPID(t, s)
	limit := unix.Rlimit{Cur: serverFiles, Max: serverFiles}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &limit, nil); err != nil {
		t.Fatalf("lowering the server's descriptor limit: %v", err)
	}

	status, body := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":512}`))
	var sb api.Sandbox
	if status != http.StatusCreated || json.Unmarshal(body, &sb) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	// Every probe comes on a connection of its own, as a new client's would.
	var lastGap atomic.Int64
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &gapConn{Conn: c, at: time.Now(), gap: &lastGap}, nil
		}}}
	probe := func(when string, i int) {
		t.Helper()
		if err := healthOnce(client, s.URL); err != nil {
			t.Fatalf("health %s (%d): %v (connect to first write: %v)", when, i, err, time.Duration(lastGap.Load()))
		}
	}
	exec := func(when string) {
		t.Helper()
		if err := execOnce(client, s, sb.ID, when); err != nil {
			t.Fatalf("exec %s: %v", when, err)
		}
	}
	exec("before the flood")

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var dialed, shut atomic.Int64
	for range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dribble(ctx, s.Addr, &dialed, &shut)
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	floodWait(t, "every slow client to connect once", func() bool { return dialed.Load() >= flood })
	floodWait(t, "the server to shed slow clients", func() bool { return shut.Load() >= flood-maxConns })

	start := time.Now()
	most := 0
	for i := 0; i < 10 || time.Since(start) < 12*time.Second; i++ {
		probe("during the flood", i)
		if i%4 == 3 {
			exec(fmt.Sprintf("during the flood (%d)", i))
		}
		most = max(most, openFiles(t, pid))
		time.Sleep(time.Duration(300+rand.IntN(400)) * time.Millisecond)
	}
	flooded := dialed.Load()
	t.Logf("flood: %d connections dialed, %d shut by the server; the server held at most %d descriptors",
		flooded, shut.Load(), most)
	if most > maxConns+200 {
		t.Errorf("the server held %d descriptors during the flood, want at most --max-conns (%d) and a few", most, maxConns)
	}
	if !strings.Contains(s.Log.String(), "shedding API connections") {
		t.Errorf("the server did not log shedding connections:\n%s", s.Log)
	}

	stop()
	wg.Wait()
	for i := range 3 {
		probe("after the flood", i)
	}
	exec("after the flood")
	floodWait(t, "the server to let the connections go", func() bool { return openFiles(t, pid) < 200 })
}

// dribble is one slow client: it sends part of a request line, then a
// byte every second or two, and connects again a second or two after the
// server shuts it, until ctx ends.
func dribble(ctx context.Context, addr string, dialed, shut *atomic.Int64) {
	d := net.Dialer{Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		dialed.Add(1)
		_, err = io.WriteString(c, "GET /v1/health HTTP/1.1\r\nX-Slow: ")
		for err == nil {
			select {
			case <-ctx.Done():
				c.Close()
				return
			case <-time.After(time.Second + rand.N(time.Second)):
			}
			_, err = c.Write([]byte("a"))
		}
		c.Close()
		shut.Add(1)
		// Back a moment later, as a client that retries would be.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second + rand.N(time.Second)):
		}
	}
}

// healthOnce asks for /v1/health once.
func healthOnce(client *http.Client, base string) error {
	resp, err := client.Get(base + "/v1/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("got %d %s, want 200", resp.StatusCode, b)
	}
	return nil
}

// execOnce runs echo in the sandbox and checks its whole stream.
func execOnce(client *http.Client, s *testenv.Server, id, word string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/v1/sandboxes/"+id+"/exec",
		strings.NewReader(`{"cmd":["echo",`+strconv.Quote(word)+`]}`))
	req.Header.Set("Authorization", "Bearer "+s.Key)
	req.Header.Set("Content-Type", "application/json")
	// Not client: its timeout is for health; an exec may take longer.
	c := &http.Client{Transport: client.Transport}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"exit_code":0`)) ||
		!bytes.Contains(out, []byte(strconv.Quote(word+"\n"))) {
		return fmt.Errorf("got %d %s, want 200 with %q and exit code 0", resp.StatusCode, out, word)
	}
	return nil
}

// raiseFiles makes sure this process may open n descriptors.
func raiseFiles(t *testing.T, n uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur < n {
		rl.Cur = min(rl.Max, n)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatal(err)
		}
	}
	if rl.Cur < n {
		t.Fatalf("this test needs %d descriptors; the hard limit is %d", n, rl.Max)
	}
}

// serverPID finds the process of s: the one serving its data dir.
func serverPID(t *testing.T, s *testenv.Server) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		args := strings.Split(string(data), "\x00")
		if len(args) > 2 && args[1] == "serve" && bytes.Contains(data, []byte("\x00"+s.DataDir+"\x00")) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no process serves %s", s.DataDir)
	return 0
}

// openFiles counts the descriptors pid holds.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// floodWait waits, generously, for cond.
func floodWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

type gapConn struct {
	net.Conn
	at   time.Time
	gap  *atomic.Int64
	once sync.Once
}

func (c *gapConn) Write(p []byte) (int, error) {
	c.once.Do(func() { c.gap.Store(int64(time.Since(c.at))) })
	return c.Conn.Write(p)
}
