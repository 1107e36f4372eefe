package microvm

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sandbox/backendtest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestVMNetwork: the VM's NIC sits behind the same plumbing as a gVisor
// sandbox: offline it reaches nothing, not even its gateway; online its
// TCP arrives at the egress proxy's port (a listener of this test).
func TestVMNetwork(t *testing.T) {
	testenv.RequiresMicroVM(t)
	egress, got := proxyRig(t, "v")
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Accel: "tcg", Egress: egress})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const id = "sbx_vmnet01"
	inst, err := b.Start(t.Context(), id, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background(), id)
	hc := agentClient(inst)
	addr, ok := b.SandboxAddr(id)
	if !ok {
		t.Fatal("no sandbox address")
	}
	if ip := agentSh(t, hc, "ip -4 -o addr show eth0 | awk '{print $4}'"); !strings.HasPrefix(ip, addr.String()+"/") {
		t.Errorf("guest eth0: got %q, want %s", ip, addr)
	}
	// Offline: the host drops everything, its own end included.
	if out := agentSh(t, hc, `gw=$(ip -o route show default | awk '{print $3}'); test -n "$gw" || exit 3
timeout 3 bash -c "echo off > /dev/tcp/$gw/80" 2>/dev/null && echo tcp-open || echo tcp-closed`); out != "tcp-closed" {
		t.Errorf("offline: got %q, want tcp-closed", out)
	}
	if err := b.SetOnline(id, true); err != nil {
		t.Fatal(err)
	}
	// 198.18.0.9 is an address no host has: the rules steer it to the proxy.
	agentSh(t, hc, `timeout 10 bash -c "echo online > /dev/tcp/198.18.0.9/80"`)
	select {
	case c := <-got:
		if c.line != "online" || c.from != addr.String() {
			t.Errorf("the proxy got %q from %s, want %q from %s (and nothing from offline)", c.line, c.from, "online", addr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy got no connection from the online VM")
	}
	if out := agentSh(t, hc, "cat /etc/resolv.conf"); !strings.Contains(out, "nameserver ") {
		t.Errorf("resolv.conf: %q", out)
	}
}

// proxied is what reached a proxyRig's proxy: the first line, and from
// where.
type proxied struct{ line, from string }

// proxyRig is egress wiring whose proxy (a listener of the test) reports
// each connection's first line; its interfaces are named after letter.
func proxyRig(t *testing.T, letter string) (*sandbox.EgressWiring, <-chan proxied) {
	t.Helper()
	egress, proxy := backendtest.EgressProxy(t, letter)
	got := make(chan proxied, 4)
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			got <- proxied{strings.TrimSpace(line), c.RemoteAddr().(*net.TCPAddr).IP.String()}
			c.Close()
		}
	}()
	return egress, got
}
