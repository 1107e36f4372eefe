package backendtest

// Helpers the backends' callers of Run share: a shell through the agent
// (Options.Shell) and egress wiring to listeners of the test
// (Options.Networked's backend).

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
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// AgentShell runs a shell command through the agent of inst and returns its stdout,
// trimmed; a command that does not exit 0 is an error.
func AgentShell(ctx context.Context, inst sandbox.Instance, cmd string) (string, error) {
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

// Egress wires a backend to egress services that are listeners of
// the test, which take what comes and answer nothing: the Network case
// checks the backend's side of the wiring, not the proxy's.
func Egress(t *testing.T, letter string) *sandbox.EgressWiring {
	t.Helper()
	w, _ := EgressProxy(t, letter)
	return w
}

// EgressProxy is Egress with the proxy's listener, for a test that reads
// what the sandbox sends it.
func EgressProxy(t *testing.T, letter string) (*sandbox.EgressWiring, net.Listener) {
	t.Helper()
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
	return &sandbox.EgressWiring{Net: network.New(network.Config{
		// Short and unique per test process on this host: the plumbing's
		// interfaces and tables are named after it.
		Name:      fmt.Sprintf("%s%02d", letter, os.Getpid()%100),
		ProxyPort: proxy.Addr().(*net.TCPAddr).Port,
		DNSPort:   dns.LocalAddr().(*net.UDPAddr).Port,
	})}, proxy
}

// AllDiffer fails t when two sandboxes read the same value (or one read
// almost nothing): what each sandbox started from one snapshot must make
// its own, such as a boot id or random bytes. read maps a sandbox to its
// value.
func AllDiffer(t *testing.T, read map[string]string) {
	t.Helper()
	seen := map[string]string{}
	for id, v := range read {
		if other, dup := seen[v]; dup || len(strings.TrimSpace(v)) < 16 {
			t.Fatalf("%s and %s read the same %q", id, other, v)
		}
		seen[v] = id
	}
}
