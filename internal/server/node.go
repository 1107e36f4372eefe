package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/backend/microvm"
	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/defaults"
	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/node"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/secrets"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/undo"
	"github.com/withruntime/withruntime/internal/webhooks"
)

// The node RPC ends a lost node's shared checkpoints through this optional
// method of the manager: a manager without it would refuse them quietly.
var _ node.RetentionEnder = (*manager.Manager)(nil)

// DefaultNodeListen is where a node daemon serves the node RPC unless
// told otherwise.
const DefaultNodeListen = ":7879"

// NodeConfig is a node daemon's configuration (withruntime node). Of
// Config, the node uses Listen (the RPC's address), DataDir, CacheDir,
// Backend, Logger, Manager, PricesFile, MetricsListen and the egress
// settings.
type NodeConfig struct {
	Config
	// Store is the installation's store (postgres://...); required.
	Store string
	// Advertise is the address API servers reach the node at (host:port;
	// default the listener's, which then must name a host).
	Advertise string
	// SharedCheckpoints is a directory every node mounts, where paused
	// sandboxes' checkpoints are kept so that any node of the same
	// Compat may resume them ("" keeps them in the data dir).
	SharedCheckpoints string
	// LeaseTTL is the node's lease in the store (node.DefaultLeaseTTL
	// when 0).
	LeaseTTL time.Duration
}

// Validate reports a configuration that cannot work.
func (c *NodeConfig) Validate() error {
	if c.Store == "" {
		return errors.New("--store is required: the installation's database (postgres://...)")
	}
	if c.SharedCheckpoints != "" && !filepath.IsAbs(c.SharedCheckpoints) {
		return errors.New("--shared-checkpoints must be an absolute path")
	}
	if c.LeaseTTL < 0 || c.LeaseTTL > 0 && c.LeaseTTL < time.Second {
		return fmt.Errorf("--node-lease %v: must be at least 1s", c.LeaseTTL)
	}
	if c.Advertise == "" {
		host, _, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return fmt.Errorf("--listen %q: %w", c.Listen, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			return fmt.Errorf("--advertise is required when --listen (%s) names no host: API servers need an address to reach this node at", c.Listen)
		}
	} else if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
		return fmt.Errorf("--advertise %q: %w", c.Advertise, err)
	}
	return c.Config.Validate()
}

// Node is a running node daemon.
type Node struct {
	// ID is the node's id (DATA/node.id), Addr where API servers reach it.
	ID, Addr string
	// MetricsURL is where GET /metrics is served ("" without
	// MetricsListen).
	MetricsURL string

	cfg     NodeConfig
	store   store.Store
	manager *manager.Manager
	volumes *volumeAPI
	egress  *egressServices
	// tracing flushes and stops the export of the manager's spans.
	tracing func(context.Context) error
	lock    *os.File // DATA/node.lock, held while the daemon runs
	lease   *node.Lease
	http    *http.Server
	metrics *http.Server // nil without MetricsListen
	done    chan error
	stop    context.CancelFunc // ends the lease loop
	renewed chan struct{}      // closed when the lease loop has returned
	certs   chan struct{}      // closed when the certificate loop has returned
	blocked chan struct{}      // closed when the blocklist's refresh has returned
}

// StartNode opens the store, takes the node's identity and certificate,
// starts the manager over this host's sandboxes (re-adopting what an
// earlier process of this node left), registers the node and serves the
// node RPC. It returns once the RPC is served.
func StartNode(ctx context.Context, cfg NodeConfig) (_ *Node, retErr error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultNodeListen
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	raiseFileLimit(cfg.Logger)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("making data dir: %w", err)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	lock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	var u undo.List
	defer u.Run(&retErr)
	u.Add(func() { lock.Close() })
	st, err := store.Open(ctx, cfg.Store, dataDir)
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	u.Add(func() { st.Close() })
	forgetStorePassword()
	id, err := nodeID(dataDir)
	if err != nil {
		return nil, err
	}
	compat, err := nodeCompat(ctx, cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	// The node's own key and request: an API server issues its
	// certificate through the registry entry. The node never holds the
	// installation's authority (clusterpki).
	nodeKey, err := clusterpki.NewNodeKey(id, filepath.Join(dataDir, "authority.crt"))
	if err != nil {
		return nil, err
	}
	tlsCfg := nodeKey.ServerTLS(st)
	vault, err := storeVault(ctx, st)
	if err != nil {
		return nil, err
	}
	// What the node registers is what admission hands out: fixed here,
	// not left to the manager's defaults.
	mc := &cfg.Manager
	if mc.HostCPUs == 0 {
		mc.HostCPUs = runtime.NumCPU()
	}
	if mc.HostMemoryMiB == 0 {
		mc.HostMemoryMiB = manager.HostMemoryMiB()
	}
	if mc.Overcommit == 0 {
		mc.Overcommit = defaults.Overcommit
	}
	mc.Node, mc.NodeCompat, mc.SharedCheckpoints = id, compat, cfg.SharedCheckpoints != ""
	// The node checks the storage quota of what it makes (snapshots,
	// volumes) against every node's records in the store.
	quota := storageQuota(cfg.StorageQuotaBytes, st)
	mc.StorageQuota = quota
	bcfg := sandbox.BackendConfig{DataDir: dataDir, CacheDir: cfg.CacheDir, SharedCheckpoints: cfg.SharedCheckpoints}
	tracing, err := openTracing(ctx, &cfg.Config)
	if err != nil {
		return nil, err
	}
	u.Add(func() { tracing(context.WithoutCancel(ctx)) })
	// The node's sandbox changes append the webhooks' events; the API
	// servers deliver them (they poll the shared store).
	st.SetEventSource(webhooks.Source(nil))
	// The metrics of a single box's host: this node's sandboxes,
	// admission, creates and egress.
	metrics := hostMetrics(&cfg.Config)
	mgr, egr, err := startHost(ctx, cfg.Config, dataDir, st, vault, bcfg)
	if err != nil {
		return nil, err
	}
	u.Add(func() {
		mgr.Close()
		if egr != nil {
			egr.close()
		}
	})
	watchHost(metrics, mgr, egr)
	// Served before the node registers: a listener that fails leaves no
	// entry behind.
	done := make(chan error, 3)
	var metricsSrv *http.Server
	var metricsURL string
	if metrics != nil {
		if metricsSrv, metricsURL, err = serveMetrics(cfg.MetricsListen, metrics, done); err != nil {
			return nil, err
		}
		u.Add(func() { metricsSrv.Close() })
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	u.Add(func() { l.Close() })
	addr := cfg.Advertise
	if addr == "" {
		addr = l.Addr().String()
	}
	// Sandboxes never reach the installation's own services, whatever
	// --egress-permit opens: the store, and the nodes (this one's
	// advertised address may be one the host's interfaces do not carry).
	var blocked *installationBlock
	if egr != nil {
		if p := egr.proxy.Load(); p != nil {
			blocked = &installationBlock{list: p.Blocklist(), store: cfg.Store, self: addr, st: st, logger: cfg.Logger}
			blocked.refresh(ctx)
		}
	}
	var diskMiB int64
	var sfs unix.Statfs_t
	if unix.Statfs(dataDir, &sfs) == nil {
		diskMiB = int64(sfs.Bavail) * int64(sfs.Bsize) >> 20
	}
	lease := node.NewLease(node.LeaseConfig{
		Node: store.Node{
			ID: id, Addr: addr, CPUs: mc.HostCPUs, MemoryMiB: mc.HostMemoryMiB, DiskMiB: diskMiB,
			Overcommit: mc.Overcommit, Compat: compat, SharedCheckpoints: cfg.SharedCheckpoints != "",
			Isolations: mgr.Isolations(), CSR: nodeKey.CSR(),
		},
		Registry: st, Manager: mgr, TTL: cfg.LeaseTTL, Logger: cfg.Logger,
	})
	if err := lease.Register(ctx); err != nil {
		return nil, fmt.Errorf("registering node %s: %w", id, err)
	}
	// The node's volumes: the images of the volumes placed here, served
	// to the API servers beside the sandboxes' RPC.
	vols, err := openVolumes(ctx, cfg.Config, dataDir, id, st, quota, mgr.DiskPromised)
	if err != nil {
		return nil, err
	}
	u.Add(func() { vols.svc.Close(context.WithoutCancel(ctx)) })
	mux := http.NewServeMux()
	(&nodeVolumes{api: vols, fenced: lease.Fenced, log: cfg.Logger}).mount(mux)
	mux.Handle("/", node.NewHandler(node.Config{Node: id, Sandboxes: mgr, State: lease, Logger: cfg.Logger, Volumes: vols.resolveNamed}))
	n := &Node{
		ID: id, Addr: addr, cfg: cfg, store: st, manager: mgr, volumes: vols, egress: egr, tracing: tracing, lock: lock, lease: lease,
		http:    node.NewServer(mux, tlsCfg, cfg.Logger),
		metrics: metricsSrv, MetricsURL: metricsURL,
		done:    done,
		renewed: make(chan struct{}),
		certs:   make(chan struct{}),
		blocked: make(chan struct{}),
	}
	leaseCtx, stop := context.WithCancel(context.Background())
	n.stop = stop
	go func() {
		defer close(n.renewed)
		lease.Run(leaseCtx)
	}()
	go func() {
		defer close(n.certs)
		nodeKey.Run(leaseCtx, st, func(err error) {
			cfg.Logger.Warn("taking the node's certificate from the store", "err", err)
		})
	}()
	go func() {
		defer close(n.blocked)
		if blocked != nil {
			blocked.run(leaseCtx)
		}
	}()
	go func() { n.done <- node.Serve(n.http, l) }()
	if egr != nil {
		go func() {
			select {
			case err := <-egr.failed:
				n.done <- err
			case <-egr.stopped:
			}
		}()
	}
	cfg.Logger.Info("node serving", "node", id, "listen", l.Addr().String(), "advertise", addr, "data_dir", dataDir, "compat", compat)
	return n, nil
}

// Wait blocks until the context ends or the RPC's listener or an egress
// service fails, then shuts down. Live sandboxes keep running for the
// next start of this node to re-adopt.
func (n *Node) Wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-n.done:
	}
	return errors.Join(err, n.Close())
}

// Close stops serving, stops renewing the lease and closes the manager and
// the store. Sandboxes keep running: a node started again on this data
// dir within the lease re-adopts them.
func (n *Node) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := n.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = n.http.Close()
	}
	if n.metrics != nil {
		n.metrics.Close()
	}
	n.stop()
	<-n.renewed
	<-n.certs
	<-n.blocked
	if verr := n.volumes.svc.Close(ctx); verr != nil {
		n.cfg.Logger.Warn("unmounting volumes", "err", verr)
	}
	n.manager.Close()
	// After the manager: the spans of its last operations go too.
	if terr := n.tracing(ctx); terr != nil {
		n.cfg.Logger.Warn("flushing traces", "err", terr)
	}
	if n.egress != nil {
		n.egress.close()
	}
	err = errors.Join(err, n.store.Close())
	n.lock.Close() // the next daemon on this data dir may start
	return err
}

// Manager exposes the node's manager (tests).
func (n *Node) Manager() *manager.Manager { return n.manager }

// Lease exposes the node's lease loop (tests).
func (n *Node) Lease() *node.Lease { return n.lease }

// nodeIDPattern is what nodeID makes: "node" and 8 hex digits.
var nodeIDPattern = regexp.MustCompile(`^node[0-9a-f]{8}$`)

// nodeID reads the node's id from DATA/node.id, making it the first time:
// a node keeps its id across restarts, so that it re-adopts its
// sandboxes.
func nodeID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "node.id")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		made := make([]byte, 4)
		rand.Read(made) // never fails (crypto/rand)
		id := "node" + hex.EncodeToString(made)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = f.WriteString(id + "\n")
			err = errors.Join(err, f.Sync(), f.Close())
			if err != nil {
				os.Remove(path)
				return "", fmt.Errorf("writing %s: %w", path, err)
			}
			return id, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("making %s: %w", path, err)
		}
		b, err = os.ReadFile(path) // another process made it meanwhile
	}
	if err != nil {
		return "", fmt.Errorf("reading the node id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !nodeIDPattern.MatchString(id) {
		return "", fmt.Errorf("%s holds %q, not a node id this program made", path, id)
	}
	return id, nil
}

// nodeCompat is what a checkpoint made on this host needs of the host that
// restores it, hashed into one string that must be equal: the runsc
// build (its version line, and its bytes, since a build from source may
// print no version), the CPU's features, and QEMU's build and the guest
// kernel (microvm.Compat).
func nodeCompat(ctx context.Context, cacheDir string) (string, error) {
	runsc := filepath.Join(cacheDir, "bin", "runsc")
	h := sha256.New()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	version, err := exec.CommandContext(ctx, runsc, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("asking %s its version (withruntime setup installs it): %w", runsc, err)
	}
	fmt.Fprintf(h, "runsc-version\x00%s\x00", version)
	f, err := os.Open(runsc)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", runsc, err)
	}
	flags, err := cpuFlags()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "\x00cpu-flags\x00%s\x00%s", flags, microvm.Compat(cacheDir))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:32], nil
}

// boxCompat is a single box's compat, what its snapshots need of the
// host that starts them: the runsc build (its pinned version, size and
// time: hashing its 100 MB at every start would cost half a second), the
// CPU's features, the built-in image's recipe, and QEMU's build and the
// guest kernel (microvm.Compat). A snapshot taken before
// an upgrade of any of them is refused, never restored half-way. What it
// cannot read counts as empty: a server whose backend needs none of it
// (a test's) starts all the same.
func boxCompat(cacheDir string) string {
	runsc := filepath.Join(cacheDir, "bin", "runsc")
	h := sha256.New()
	if fi, err := os.Stat(runsc); err == nil {
		fmt.Fprintf(h, "runsc\x00%d\x00%d\x00", fi.Size(), fi.ModTime().UnixNano())
	}
	version, _ := os.ReadFile(runsc + ".version")
	flags, _ := cpuFlags()
	fmt.Fprintf(h, "%s\x00cpu-flags\x00%s\x00image\x00%s\x00%s", bytes.TrimSpace(version), flags, image.Default.Key(), microvm.Compat(cacheDir))
	return "box:sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// cpuFlags is the first flags line of /proc/cpuinfo.
func cpuFlags() (string, error) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "", fmt.Errorf("reading the CPU's features: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "flags" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("/proc/cpuinfo lists no CPU flags")
}

// storeVault is the secrets vault over st with the installation's key,
// kept in the store: every node opens what any API server sealed.
func storeVault(ctx context.Context, st store.Store) (*secrets.Vault, error) {
	key, err := sharedValue(ctx, st, valueVaultKey, secrets.KeySize)
	if err != nil {
		return nil, err
	}
	return secrets.OpenKey(key, st)
}
