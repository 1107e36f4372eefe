package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/testenv"
)

// nodeLease is the nodes' lease: short, so that a lost node is declared
// lost within seconds.
const nodeLease = 3 * time.Second

// nodeStorageQuotaGiB is the nodes' storage quota: small, so that a
// scenario reaches it with one volume.
const nodeStorageQuotaGiB = 4

// detectEvery is the API servers' failure detector interval.
const detectEvery = 500 * time.Millisecond

// rig is the whole installation of one test run.
type rig struct {
	t         *testing.T
	tag       string // 4 hex digits naming everything host-wide
	dir       string
	bridge    string
	dbURL     string // the run's database, for the root namespace
	nodeDBURL string // the same through the forwarder, for the nodes
	fwd       *forwarder
	st        *store.Postgres // the test's own look at the store
	nodes     []*node
	apis      []*apiServer
	key       string // the admin key
	shared    string // --shared-checkpoints of every node

	mu      sync.Mutex
	created []owned // every sandbox made, destroyed at the end
}

type owned struct{ key, id string }

// need fails the test under CI and skips it elsewhere: CI must have
// everything the tier needs.
func need(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must have this: %s", why)
	}
	t.Skip(why)
}

// newBase makes what the rig's processes stand on: a database of its own,
// the network and the forwarder. Everything goes when the test ends, on
// failure too.
func newBase(t *testing.T) *rig {
	t.Helper()
	testenv.RequiresRoot(t)
	base := os.Getenv("WITHRUNTIME_TEST_POSTGRES")
	if base == "" {
		need(t, "WITHRUNTIME_TEST_POSTGRES is not set (scripts/postgres.sh start; scripts/postgres.sh url)")
	}
	for _, tool := range []string{"ip", "nft", "nsenter"} {
		if _, err := osLookPath(tool); err != nil {
			need(t, tool+" is not installed")
		}
	}
	var b [2]byte
	rand.Read(b[:])
	r := &rig{t: t, tag: hex.EncodeToString(b[:]), dir: t.TempDir()}
	r.database(base)
	r.network()
	pg, err := url.Parse(r.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	r.fwd = startForwarder(t, pg.Host)
	pg.Host = fmt.Sprintf("%s:%d", bridgeAddr, r.fwd.port)
	r.nodeDBURL = pg.String()
	return r
}

// newRig makes the installation: newBase, three nodes and two API servers.
// Cleanups run last-in first-out: the sandboxes made, the processes, what
// sandboxes of killed nodes left, then the network and the database.
func newRig(t *testing.T) *rig {
	t.Helper()
	testenv.RequiresGvisor(t)
	r := newBase(t)
	r.shared = filepath.Join(r.dir, "checkpoints")
	if err := os.MkdirAll(r.shared, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenPostgres(context.Background(), r.dbURL)
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	r.st = st
	t.Cleanup(func() { st.Close() })

	t.Cleanup(r.scrub)
	t.Cleanup(r.stopAll)
	t.Cleanup(r.destroyCreated)
	t.Cleanup(r.dumpLogs)
	// The first API server makes the admin key (and the installation's
	// CA); the nodes and the second server find them.
	r.apis = append(r.apis, r.startAPI("api1"))
	// One after the other: nodes that start together on one cache race
	// to install the agent into it (one rename of a shared temporary
	// name fails).
	for i, n := range r.nodes {
		n.name = fmt.Sprintf("node%d", i+1)
		n.dataDir = filepath.Join(r.dir, n.name)
		r.startNode(n)
		r.waitNode(n)
	}
	r.apis = append(r.apis, r.startAPI("api2"))
	return r
}

// database makes a fresh database for the run, dropped at the end.
func (r *rig) database(base string) {
	t := r.t
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("WITHRUNTIME_TEST_POSTGRES: %v", err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" {
		t.Fatalf("WITHRUNTIME_TEST_POSTGRES must be on loopback, not %s", h)
	}
	u.Host = "127.0.0.1:" + u.Port()
	admin := u.String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		need(t, fmt.Sprintf("PostgreSQL at WITHRUNTIME_TEST_POSTGRES does not answer: %v", err))
	}
	defer conn.Close(ctx)
	name := "wrc_" + r.tag + "_" + fmt.Sprint(time.Now().UnixNano()%1e6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("dropping database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	r.dbURL = u.String()
}

// apiServer is one `withruntime serve --store` process.
type apiServer struct {
	*proc
	url     string
	dataDir string
	metrics string // its --metrics-listen, as a URL
}

func (r *rig) startAPI(name string) *apiServer {
	t := r.t
	t.Helper()
	addr, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	a := &apiServer{url: "http://" + addr, metrics: "http://" + metrics, dataDir: filepath.Join(r.dir, name)}
	if len(r.apis) > 0 {
		// Every API server after the first gets the authority's seal key,
		// as an operator hands it out (docs/DEPLOY.md); nodes never do.
		if err := os.MkdirAll(a.dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		key, err := os.ReadFile(filepath.Join(r.apis[0].dataDir, "authority.key"))
		if err == nil {
			err = os.WriteFile(filepath.Join(a.dataDir, "authority.key"), key, 0o600)
		}
		if err != nil {
			t.Fatalf("handing out the authority's seal key: %v", err)
		}
	}
	args := []string{"serve", "--store", r.dbURL, "--listen", addr, "--data-dir", a.dataDir, "--metrics-listen", metrics}
	if serveHasFlag(t, "--detect-interval") {
		args = append(args, "--detect-interval", detectEvery.String())
	}
	a.proc = r.newProc(name, "", args...)
	r.startAPIProc(a)
	if r.key == "" {
		key, err := os.ReadFile(filepath.Join(a.dataDir, "admin.key"))
		if err != nil {
			t.Fatalf("reading the admin key: %v", err)
		}
		r.key = strings.TrimSpace(string(key))
	}
	return a
}

// startAPIProc starts (or restarts) an API server and waits until it
// answers.
func (r *rig) startAPIProc(a *apiServer) {
	t := r.t
	t.Helper()
	a.start(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.url + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) || a.exited() {
			t.Fatalf("%s did not answer: %v\n%s", a.name, err, a.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveHasFlag reports whether `withruntime serve` takes flag: the
// detector's interval is short when it does (the default, 2s, otherwise).
func serveHasFlag(t testing.TB, flag string) bool {
	out, _ := exec.Command(testenv.CLI(t), "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), flag+" ")
}

// node is one `withruntime node` daemon in its namespace.
type node struct {
	*proc
	name    string
	ns      string
	addr    string // its address on the bridge
	dataDir string
	id      string // from DATA/node.id, once it started
	extra   []string
}

func (r *rig) startNode(n *node) {
	t := r.t
	t.Helper()
	args := []string{"node", "--store", r.nodeDBURL, "--data-dir", n.dataDir, "--cache-dir", testenv.CacheDir(),
		"--listen", n.addr + ":" + nodePort, "--node-lease", nodeLease.String(), "--overcommit", "8",
		"--pool", "none", "--shared-checkpoints", r.shared, "--storage-quota-gib", strconv.Itoa(nodeStorageQuotaGiB),
		"--metrics-listen", n.addr + ":" + metricsPort}
	args = append(args, n.extra...)
	if n.proc == nil {
		n.proc = r.newProc(n.name, n.ns, args...)
	}
	n.proc.args = args
	n.start(t)
}

// waitNode waits until node n is registered, live, at its address, and
// its RPC port takes connections.
func (r *rig) waitNode(n *node) {
	t := r.t
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if n.exited() {
			t.Fatalf("%s exited:\n%s", n.name, n.tail())
		}
		if n.id == "" {
			if b, err := os.ReadFile(filepath.Join(n.dataDir, "node.id")); err == nil {
				n.id = strings.TrimSpace(string(b))
			}
		}
		if n.id != "" && r.nodeLive(n) {
			if c, err := net.DialTimeout("tcp4", n.addr+":"+nodePort, time.Second); err == nil {
				c.Close()
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not register and listen:\n%s", n.name, n.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeEntry is node n's registry entry (nil when it has none).
func (r *rig) nodeEntry(n *node) *store.Node {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := r.st.ListNodes(ctx)
	if err != nil {
		r.t.Logf("listing nodes: %v", err)
		return nil
	}
	for _, e := range list {
		if e.ID == n.id {
			return &e
		}
	}
	return nil
}

func (r *rig) nodeLive(n *node) bool {
	e := r.nodeEntry(n)
	return e != nil && !e.Lost && !e.Expired && e.Addr == n.addr+":"+nodePort
}

// byID is the rig's node of that id.
func (r *rig) byID(id string) *node {
	for _, n := range r.nodes {
		if n.id == id {
			return n
		}
	}
	r.t.Fatalf("no node of the rig has id %q", id)
	return nil
}

// destroyCreated stops every sandbox the tests made, through any API
// server that answers, so that none outlives the run.
func (r *rig) destroyCreated() {
	r.mu.Lock()
	created := append([]owned(nil), r.created...)
	r.mu.Unlock()
	for _, o := range created {
		for _, a := range r.apis {
			if a.exited() {
				continue
			}
			if st, _ := r.do(a, o.key, "DELETE", "/v1/sandboxes/"+o.id, nil); st < 500 {
				break
			}
		}
	}
}

// stopAll ends every process: SIGTERM, then SIGKILL.
func (r *rig) stopAll() {
	for _, a := range r.apis {
		a.stop()
	}
	for _, n := range r.nodes {
		if n.proc != nil {
			n.stop()
		}
	}
}

// scrub removes what sandboxes of the nodes left on the host when a node
// could not destroy them (it was killed, or a test failed half way): the
// sandbox processes, runsc's containers, their mounts and cgroups.
func (r *rig) scrub() {
	runsc := filepath.Join(testenv.CacheDir(), "bin", "runsc")
	for _, n := range r.nodes {
		if n.dataDir == "" {
			continue
		}
		run := runDir(n.dataDir)
		for _, c := range runscList(runsc, run, n.ns) {
			if c.pid > 0 {
				syscallKill(c.pid)
			}
			quiet("nsenter", "--net=/run/netns/"+n.ns, "--", runsc, "--root", filepath.Join(run, "runsc"), "delete", "--force", c.id)
			removeCgroups(c.id)
		}
		if entries, err := os.ReadDir(filepath.Join(n.dataDir, "sandboxes")); err == nil {
			for _, e := range entries {
				removeCgroups(e.Name())
			}
		}
		unmountUnder(run)
		os.RemoveAll(run)
		// The node's claim of its network tag names a data dir that is
		// about to go.
		claims, _ := filepath.Glob("/run/withruntime/network-tags/*")
		for _, c := range claims {
			if b, err := os.ReadFile(c); err == nil && strings.TrimSpace(string(b)) == n.dataDir {
				os.Remove(c)
			}
		}
	}
}

// dumpLogs prints the tail of every process's log when the test failed.
func (r *rig) dumpLogs() {
	if !r.t.Failed() {
		return
	}
	for _, a := range r.apis {
		r.t.Logf("--- %s ---\n%s", a.name, a.tail())
	}
	for _, n := range r.nodes {
		if n.proc != nil {
			r.t.Logf("--- %s (%s) ---\n%s", n.name, n.id, n.tail())
		}
	}
}

// logHas reports whether p's log has a line containing s.
func logHas(p *proc, s string) bool {
	f, err := os.Open(p.logPath)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true
		}
	}
	return false
}
