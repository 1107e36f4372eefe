package gvisor

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

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sandbox/backendtest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestBackendSuite runs the backend suite against gVisor: every case,
// real sandboxes, a fresh data dir each; once with checkpoints kept in the
// data dir and once in a shared checkpoint dir (where the digest of a
// pause is checked on resume). Attach is tried on a second backend over
// the same dirs, as a restarted server opens them.
func TestBackendSuite(t *testing.T) {
	testenv.RequiresGvisor(t)
	for _, shared := range []bool{false, true} {
		name := "gvisor"
		if shared {
			name += "+shared"
		}
		t.Run(name, func(t *testing.T) {
			var cfg Config
			open := func(t *testing.T) *Backend {
				b, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				// Registered before the suite's own cleanups, so run
				// after them: with its sandboxes destroyed, Close
				// removes the run dir.
				t.Cleanup(func() { b.Close() })
				return b
			}
			backendtest.Run(t, name, func(t *testing.T) sandbox.Backend {
				cfg = Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir()}
				if shared {
					cfg.SharedCheckpoints = t.TempDir()
				}
				return open(t)
			}, backendtest.Options{
				Spec: sandbox.Spec{Image: image.DefaultName, VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256},
				Reopen: func(t *testing.T, old sandbox.Backend) sandbox.Backend {
					// The old server's end: its agent links close, so
					// that the agents dial the new backend's listeners,
					// and it forgets its instances (a link's directory
					// is a raw descriptor: closed twice, the second
					// close would hit whatever reused its number).
					o := old.(*Backend)
					o.mu.Lock()
					for id, inst := range o.instances {
						inst.link.close()
						delete(o.instances, id)
					}
					o.mu.Unlock()
					return open(t)
				},
				Networked: func(t *testing.T) sandbox.Backend {
					b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Egress: suiteEgress(t, "g")})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { b.Close() })
					return b
				},
				Shell: agentSh,
				Slow:  true,
			})
		})
	}
}

// agentSh runs a shell command through the agent and returns its stdout,
// trimmed; a command that does not exit 0 is an error.
func agentSh(ctx context.Context, inst sandbox.Instance, cmd string) (string, error) {
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
