package promexport

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
	"github.com/withruntime/withruntime/internal/testenv"
)

// openPostgres is a store on a fresh database of the test server, reached
// at via(its host:port) when via is set (a proxy).
func openPostgres(t *testing.T, via func(host string) string) *store.Postgres {
	t.Helper()
	u, err := url.Parse(testenv.FreshPostgres(t, "withruntime_promexport_"))
	if err != nil {
		t.Fatal(err)
	}
	if via != nil {
		u.Host = via(u.Host)
	}
	st, err := store.OpenPostgres(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestClusterMetrics: what an API server of many hosts exports matches
// the registry and the records in the store, on both stores.
func TestClusterMetrics(t *testing.T) {
	t.Run("bolt", func(t *testing.T) { testClusterMetrics(t, storetest.OpenBolt(t)) })
	t.Run("postgres", func(t *testing.T) { testClusterMetrics(t, openPostgres(t, nil)) })
}

func testClusterMetrics(t *testing.T, st store.Store) {
	ctx := t.Context()
	register := func(id, compat string, ttl time.Duration) *store.Node {
		n := &store.Node{ID: id, Addr: "10.9.9.9:7879", CPUs: 8, MemoryMiB: 16384, DiskMiB: 100 << 10, Overcommit: 2, Compat: compat}
		if err := st.RegisterNode(ctx, n, ttl); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := register("node-a", "runsc-1/avx", time.Hour)
	register("node-b", "runsc-2/avx", time.Hour)
	register("node-c", "runsc-1/avx", time.Hour)
	lost := register("node-lost", "runsc-1/avx", time.Second)
	register("node-old", "runsc-1/avx", time.Second)
	now := time.Now().UTC().Truncate(time.Millisecond)
	put := func(id, node, isolation string, state sandbox.State) {
		r := &sandbox.Record{
			ID: id, Account: "acct", Node: node, State: state, CreatedAt: now, LeaseEndsAt: now.Add(time.Hour),
			Backend: "gvisor", Spec: sandbox.Spec{VCPUs: 2, MemoryMiB: 4096, Isolation: isolation},
		}
		if state == sandbox.StatePaused {
			r.PausedAt = &now
		}
		if state == sandbox.StateEnded {
			r.EndedAt, r.EndReason = &now, sandbox.EndReason("stopped")
		}
		if err := st.PutSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	put("sb-1", "node-a", "gvisor", sandbox.StateRunning)
	put("sb-2", "node-a", "", sandbox.StateRunning) // a record from before isolations: its backend's
	put("sb-3", "node-a", "microvm", sandbox.StatePaused)
	put("sb-4", "node-b", "gvisor", sandbox.StateStarting)
	put("sb-5", "node-b", "gvisor", sandbox.StateEnded)
	time.Sleep(1100 * time.Millisecond) // node-lost's and node-old's leases run out
	if won, err := st.MarkNodeLost(ctx, lost.ID, lost.Epoch); err != nil || !won {
		t.Fatalf("marking node-lost lost: %v %v", won, err)
	}
	if _, err := st.RenewNode(ctx, a.ID, a.Epoch, store.NodeLoad{Sandboxes: 3, VCPUs: 6, MemoryMiB: 12288, DiskMiB: 30 << 10}, time.Hour); err != nil {
		t.Fatal(err)
	}

	e := New()
	e.WatchCluster(st)
	fams := scrape(t, e)
	checkValues(t, fams, []sample{
		{"withruntime_store_up", nil, 1},
		{"withruntime_nodes", []string{"state", "up"}, 3},
		{"withruntime_nodes", []string{"state", "expired"}, 1},
		{"withruntime_nodes", []string{"state", "lost"}, 1},
		{"withruntime_nodes_compat_groups", nil, 2},
		{"withruntime_node_up", []string{"node", "node-a"}, 1},
		{"withruntime_node_up", []string{"node", "node-old"}, 0},
		{"withruntime_node_up", []string{"node", "node-lost"}, 0},
		{"withruntime_node_capacity", []string{"node", "node-b", "resource", "vcpus"}, 16},
		{"withruntime_node_capacity", []string{"node", "node-b", "resource", "disk_mib"}, 200 << 10},
		{"withruntime_node_held", []string{"node", "node-a", "resource", "memory_mib"}, 12288},
		{"withruntime_node_held", []string{"node", "node-b", "resource", "vcpus"}, 0},
		{"withruntime_node_sandboxes", []string{"node", "node-a"}, 3},
		{"withruntime_cluster_sandboxes", []string{"isolation", "gvisor", "state", "running"}, 2},
		{"withruntime_cluster_sandboxes", []string{"isolation", "microvm", "state", "paused"}, 1},
		{"withruntime_cluster_sandboxes", []string{"isolation", "gvisor", "state", "starting"}, 1},
	})
	if got := value(fams, "withruntime_cluster_sandboxes", "state", "ended"); got != -1 {
		t.Errorf("ended sandboxes exported: %v", got)
	}
	if got := value(fams, "withruntime_node_heartbeat_age_seconds", "node", "node-old"); got < 1 || got > 60 {
		t.Errorf("node-old's heartbeat age %v s, want at least its 1 s lease", got)
	}
	if got := value(fams, "withruntime_node_heartbeat_age_seconds", "node", "node-a"); got < 0 || got >= 1 {
		t.Errorf("node-a's heartbeat age %v s, want under 1 s (it just renewed)", got)
	}
	if got := value(fams, "withruntime_store_latency_seconds"); got < 0 || got > 2 {
		t.Errorf("store latency %v s", got)
	}
	// No address, sandbox id or account is a label.
	for _, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if v := l.GetValue(); v == "10.9.9.9:7879" || v == "acct" || len(v) > 3 && v[:3] == "sb-" {
					t.Errorf("%s has label %s=%q", f.GetName(), l.GetName(), v)
				}
			}
		}
	}
}

// TestClusterStoreDown: a store that fails or does not answer is
// store_up 0 within the scrape's bound, and nothing of the registry.
func TestClusterStoreDown(t *testing.T) {
	t.Run("closed", func(t *testing.T) {
		st := storetest.OpenBolt(t)
		st.Close()
		checkDown(t, st, time.Second)
	})
	t.Run("unreachable", func(t *testing.T) {
		// The store is reached through a proxy that, once frozen, passes
		// nothing either way: a network that drops the store's packets.
		p := &freezer{}
		st := openPostgres(t, p.start(t))
		t.Cleanup(p.release) // before the store closes: it says goodbye
		if err := st.RegisterNode(t.Context(), &store.Node{ID: "node-a", CPUs: 1, MemoryMiB: 1024}, time.Hour); err != nil {
			t.Fatal(err)
		}
		e := New()
		e.WatchCluster(st)
		if got := value(scrape(t, e), "withruntime_nodes", "state", "up"); got != 1 {
			t.Fatalf("before the freeze: %v nodes up, want 1", got)
		}
		p.freeze()
		checkDown(t, st, registryTimeout+time.Second)
	})
}

// checkDown scrapes st's metrics and wants store_up 0 within bound.
func checkDown(t *testing.T, st Registry, bound time.Duration) {
	t.Helper()
	e := New()
	e.WatchCluster(st)
	start := time.Now()
	fams := scrape(t, e)
	took := time.Since(start)
	t.Logf("scrape of a dead store took %v", took)
	if took > bound {
		t.Errorf("scrape took %v, want under %v", took, bound)
	}
	if got := value(fams, "withruntime_store_up"); got != 0 {
		t.Errorf("store_up %v, want 0", got)
	}
	if fams["withruntime_nodes"] != nil || fams["withruntime_cluster_sandboxes"] != nil {
		t.Error("registry metrics exported though the store did not answer")
	}
	if got := value(fams, "withruntime_store_latency_seconds"); got < 0 {
		t.Error("no store latency")
	}
}

// freezer is a TCP proxy to one address that can be frozen: from then on
// it forwards nothing and answers no new connection.
type freezer struct {
	mu     sync.Mutex
	target string // what it forwards to
	frozen chan struct{}
	done   chan struct{} // closed by release: frozen connections end
	once   sync.Once
	end    sync.Once
}

// start listens on loopback and returns the function that maps the
// proxied host:port to the proxy's.
func (p *freezer) start(t *testing.T) func(string) string {
	p.frozen = make(chan struct{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.done = make(chan struct{})
	done := p.done
	t.Cleanup(func() { p.release(); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			target := p.target
			p.mu.Unlock()
			go p.forward(c, target, done)
		}
	}()
	return func(host string) string {
		p.mu.Lock()
		p.target = host
		p.mu.Unlock()
		return l.Addr().String()
	}
}

func (p *freezer) freeze() { p.once.Do(func() { close(p.frozen) }) }

// release ends the frozen connections (and every later one).
func (p *freezer) release() { p.end.Do(func() { close(p.done) }) }

// forward copies c to and from target until either closes, holding every
// read from the moment of the freeze until done.
func (p *freezer) forward(c net.Conn, target string, done chan struct{}) {
	defer c.Close()
	select {
	case <-p.frozen:
		<-done
		return
	default:
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	// Either way's end ends both.
	go func() {
		p.copy(up, c, done)
		c.Close()
		up.Close()
	}()
	p.copy(c, up, done)
}

func (p *freezer) copy(dst io.Writer, src io.Reader, done chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			<-done
			return
		default:
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
