package cluster

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The rig's addresses: 198.18.0.0/15 is for benchmarking and routed
// nowhere; the rig takes 198.18.0.0/24 (test/e2e's upstreams use
// 198.18.77.0/24). The bridge has bridgeAddr in the root namespace; node i
// has nodeAddrs[i] in its own namespace.
const (
	rigPrefix  = "198.18.0."
	bridgeAddr = "198.18.0.1"
	nodePort   = "7443"
	// metricsPort is where each node serves --metrics-listen, on its
	// bridge address.
	metricsPort = "9464"
)

var nodeAddrs = []string{"198.18.0.11", "198.18.0.12", "198.18.0.13"}

// rigLock is held by the one test process on the host that has the rig's
// prefix: another run waits, and the holder removes what a run that died
// left behind (its bridge, namespaces and table all start with "wrc").
const rigLock = "/run/withruntime/cluster-rig.lock"

// sh runs a command and fails the test with its output if it fails.
func sh(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// shIn runs a command inside network namespace ns (and only its network
// namespace: see nodeCommand).
func shIn(t testing.TB, ns string, name string, args ...string) string {
	t.Helper()
	return sh(t, "nsenter", append([]string{"--net=/run/netns/" + ns, "--", name}, args...)...)
}

// quiet runs a clean-up command and ignores its failure (what it removes
// may be gone already).
func quiet(name string, args ...string) { exec.Command(name, args...).Run() }

func lockRig(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(rigLock), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(rigLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			f.Close()
			t.Fatalf("another test run has held %s for 5 minutes", rigLock)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() })
	// Leftovers of a run that died: only a holder of the lock makes these.
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "wrc") {
				quiet("ip", "netns", "delete", f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "wrc") {
				quiet("ip", "link", "delete", strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
			}
		}
	}
	if out, err := exec.Command("nft", "list", "tables").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[2], "wrc") {
				quiet("nft", "delete", "table", f[1], f[2])
			}
		}
	}
}

// network makes the bridge, the nodes' namespaces and their veths, and the
// root namespace's table that forwards nothing to or from the bridge (a
// node's packets for anywhere but the bridge's address go nowhere). It
// checks every address and route before anything is sent: a failed set-up
// must never send a packet off the machine.
func (r *rig) network() {
	t := r.t
	t.Helper()
	lockRig(t)
	for _, line := range strings.Split(sh(t, "ip", "-4", "-o", "addr", "show"), "\n") {
		if strings.Contains(line, " "+rigPrefix) {
			t.Fatalf("198.18.0.0/24 is already on this host (%s): something else uses the rig's prefix", line)
		}
	}
	r.bridge = "wrc" + r.tag
	t.Cleanup(func() { quiet("ip", "link", "delete", r.bridge) })
	sh(t, "ip", "link", "add", r.bridge, "type", "bridge")
	os.WriteFile("/proc/sys/net/ipv6/conf/"+r.bridge+"/disable_ipv6", []byte("1"), 0)
	sh(t, "ip", "addr", "add", bridgeAddr+"/24", "dev", r.bridge)
	sh(t, "ip", "link", "set", r.bridge, "up")

	t.Cleanup(func() { quiet("nft", "delete", "table", "inet", r.bridge) })
	nftScript(t, "", fmt.Sprintf(`table inet %[1]s {
	chain forward {
		type filter hook forward priority -10; policy accept;
		iifname "%[1]s" drop
		oifname "%[1]s" drop
	}
}`, r.bridge))

	for i, addr := range nodeAddrs {
		ns := fmt.Sprintf("wrc%s-n%d", r.tag, i+1)
		veth := fmt.Sprintf("wrc%sn%d", r.tag, i+1)
		t.Cleanup(func() { quiet("ip", "netns", "delete", ns) })
		sh(t, "ip", "netns", "add", ns)
		sh(t, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		os.WriteFile("/proc/sys/net/ipv6/conf/"+veth+"/disable_ipv6", []byte("1"), 0)
		sh(t, "ip", "link", "set", veth, "master", r.bridge, "up")
		shIn(t, ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
		sh(t, "ip", "-n", ns, "addr", "add", addr+"/24", "dev", "eth0")
		sh(t, "ip", "-n", ns, "link", "set", "eth0", "up")
		sh(t, "ip", "-n", ns, "link", "set", "lo", "up")
		sh(t, "ip", "-n", ns, "route", "add", "default", "via", bridgeAddr)
		// The namespace's side: its address, and the bridge's reached on
		// its veth.
		if got := sh(t, "ip", "-n", ns, "-4", "-o", "addr", "show", "dev", "eth0"); !strings.Contains(got, " "+addr+"/24 ") {
			t.Fatalf("%s lacks %s: %s", ns, addr, got)
		}
		if got := sh(t, "ip", "-n", ns, "route", "get", bridgeAddr); !strings.Contains(got, " dev eth0 ") {
			t.Fatalf("in %s, %s routes %q, want dev eth0: refusing to send anything", ns, bridgeAddr, got)
		}
		// The root's side: the node's address is on the bridge.
		if got := sh(t, "ip", "route", "get", addr); !strings.Contains(got, " dev "+r.bridge+" ") {
			t.Fatalf("%s routes %q, want dev %s: refusing to send anything", addr, got, r.bridge)
		}
		r.nodes = append(r.nodes, &node{ns: ns, addr: addr})
	}
}

// nftScript loads an nft script in namespace ns ("" for the root one).
func nftScript(t testing.TB, ns, script string) {
	t.Helper()
	cmd := exec.Command("nft", "-f", "-")
	if ns != "" {
		cmd = exec.Command("nsenter", "--net=/run/netns/"+ns, "--", "nft", "-f", "-")
	}
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %q: %v\n%s\n%s", ns, err, out, script)
	}
}

// cut makes node n unable to reach the store: its packets to and from the
// forwarder are dropped inside its namespace. Everything else (the API
// servers' calls to it) still passes, so a refusal is the node's own.
func (r *rig) cut(n *node) {
	r.t.Helper()
	nftScript(r.t, n.ns, fmt.Sprintf(`table inet wrccut {
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr %[1]s tcp dport %[2]d drop
	}
	chain in {
		type filter hook input priority 0; policy accept;
		ip saddr %[1]s tcp sport %[2]d drop
	}
}`, bridgeAddr, r.fwd.port))
}

// heal removes the rule of cut.
func (r *rig) heal(n *node) {
	r.t.Helper()
	shIn(r.t, n.ns, "nft", "delete", "table", "inet", "wrccut")
}

// forwarder relays TCP from the bridge's address to PostgreSQL on
// loopback, where it listens only: the nodes reach the store through it,
// so a rule inside a node's namespace can cut that node off.
type forwarder struct {
	ln    net.Listener
	port  int
	to    string
	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startForwarder(t *testing.T, to string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp4", bridgeAddr+":0")
	if err != nil {
		t.Fatalf("forwarder: %v", err)
	}
	f := &forwarder{ln: ln, port: ln.Addr().(*net.TCPAddr).Port, to: to, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp4", f.to)
		if err != nil {
			c.Close()
			continue
		}
		f.mu.Lock()
		f.conns[c], f.conns[up] = true, true
		f.mu.Unlock()
		f.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer f.wg.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			f.mu.Lock()
			delete(f.conns, dst)
			delete(f.conns, src)
			f.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
