package microvm

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestVMNetwork: the VM's NIC sits behind the same plumbing as a gVisor
// sandbox: offline it reaches nothing, not even its gateway; online its
// TCP arrives at the egress proxy's port (a listener of this test).
func TestVMNetwork(t *testing.T) {
	testenv.RequiresMicroVM(t)
	proxy, err := network.ListenTCP(&net.TCPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	dns, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			got <- strings.TrimSpace(line)
			c.Close()
		}
	}()
	tag := fmt.Sprintf("v%02d", os.Getpid()%100)
	b, err := New(Config{DataDir: t.TempDir(), CacheDir: testenv.CacheDir(), Accel: "tcg", Egress: &sandbox.EgressWiring{Net: network.New(network.Config{
		Name: tag, ProxyPort: proxy.Addr().(*net.TCPAddr).Port, DNSPort: dns.LocalAddr().(*net.UDPAddr).Port,
	})}})
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
	case line := <-got:
		if line != "online" {
			t.Errorf("the proxy got %q, want %q (and nothing from offline)", line, "online")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy got no connection from the online VM")
	}
	if out := agentSh(t, hc, "cat /etc/resolv.conf"); !strings.Contains(out, "nameserver ") {
		t.Errorf("resolv.conf: %q", out)
	}
}
