package microvm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sandbox/backendtest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestBackendSuite runs the backend suite against microVMs under TCG
// (this host's KVM boots no stock kernel), a fresh data dir each. Every
// boot there takes seconds, so the cases the suite marks slow run only
// with WITHRUNTIME_BACKENDTEST_SLOW=1; the fast ones still boot, attach,
// freeze, meter and sweep a real VM. Attach is tried on a second backend
// over the same data dir, as a restarted server opens it.
func TestBackendSuite(t *testing.T) {
	testenv.RequiresMicroVM(t)
	var dataDir string
	open := func(t *testing.T) *Backend {
		b, err := New(Config{DataDir: dataDir, CacheDir: testenv.CacheDir(), Accel: "tcg"})
		if err != nil {
			t.Fatal(err)
		}
		// Registered before the suite's own cleanups, so run after them:
		// with its sandboxes destroyed, Close removes the run dir.
		t.Cleanup(func() { b.Close() })
		return b
	}
	backendtest.Run(t, "microvm", func(t *testing.T) sandbox.Backend {
		dataDir = t.TempDir()
		return open(t)
	}, backendtest.Options{
		Spec: testSpec(),
		Reopen: func(t *testing.T, old sandbox.Backend) sandbox.Backend {
			// The old server's end: its monitor and agent connections
			// close, QEMU runs on, and it forgets its instances.
			o := old.(*Backend)
			o.mu.Lock()
			for id, inst := range o.instances {
				inst.close()
				delete(o.instances, id)
			}
			o.mu.Unlock()
			return open(t)
		},
		Networked: func(t *testing.T) sandbox.Backend {
			b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Accel: "tcg", Egress: suiteEgress(t, "m")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
		Shell:      suiteShell,
		Slow:       os.Getenv("WITHRUNTIME_BACKENDTEST_SLOW") != "",
		SlowReason: "a slow case under TCG: run with WITHRUNTIME_BACKENDTEST_SLOW=1",
		Wait:       90 * time.Second,
	})
}

// suiteShell runs a shell command through the agent and returns its stdout,
// trimmed; a command that does not exit 0 is an error.
func suiteShell(ctx context.Context, inst sandbox.Instance, cmd string) (string, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
		DisableKeepAlives: true,
	}}
	body, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Shell: cmd}})
	req, err := http.NewRequestWithContext(ctx, "POST", "http://agent/exec", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("exec %q: %s", cmd, resp.Status)
	}
	var out, errOut strings.Builder
	exit := -1
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return "", fmt.Errorf("decoding %q: %w", sc.Bytes(), err)
		}
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			s, err := ev.Output()
			if err != nil {
				return "", err
			}
			if ev.Type == api.EventStdout {
				out.WriteString(s)
			} else {
				errOut.WriteString(s)
			}
		case api.EventExit:
			if ev.ExitCode != nil {
				exit = *ev.ExitCode
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if exit != 0 {
		return "", fmt.Errorf("exec %q: exit %d, stderr %q", cmd, exit, errOut.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// suiteEgress wires a backend to egress services that are listeners of
// the test, which take what comes and answer nothing: the Network case
// checks the backend's side of the wiring, not the proxy's.
func suiteEgress(t *testing.T, letter string) *sandbox.EgressWiring {
	proxy, err := network.ListenTCP(&net.TCPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	dns, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	return &sandbox.EgressWiring{
		// Short and unique per test process on this host: the plumbing's
		// interfaces and tables are named after it.
		Tag:       fmt.Sprintf("%s%02d", letter, os.Getpid()%100),
		ProxyPort: proxy.Addr().(*net.TCPAddr).Port,
		DNSPort:   dns.LocalAddr().(*net.UDPAddr).Port,
	}
}
