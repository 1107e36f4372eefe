package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	_ "github.com/withruntime/withruntime/internal/backend/all" // registers every backend
	"github.com/withruntime/withruntime/internal/billing"
	"github.com/withruntime/withruntime/internal/cluster"
	"github.com/withruntime/withruntime/internal/console"
	"github.com/withruntime/withruntime/internal/httpapi"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sdkdist"
	"github.com/withruntime/withruntime/internal/secrets"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/undo"
)

// Server is a running withruntime server.
type Server struct {
	URL      string
	AdminKey string
	// E2BURL is where E2B's protocol is served ("" without
	// Config.E2BListen).
	E2BURL string
	// PreviewURL is where the preview URLs' host form is served on a
	// listener of its own ("" without Config.PreviewListen).
	PreviewURL string
	// MetricsURL is where GET /metrics is served ("" without
	// Config.MetricsListen).
	MetricsURL string

	cfg     Config
	store   store.Store
	manager *manager.Manager // nil on an API server of many hosts
	control *cluster.Control // set on an API server of many hosts only
	egress  *egressServices
	// tracing flushes and stops the export of the manager's spans.
	tracing func(context.Context) error
	http    *http.Server
	e2b     *http.Server // nil without Config.E2BListen
	preview *http.Server // nil without Config.PreviewListen
	metrics *http.Server // nil without Config.MetricsListen
	done    chan error
	idle    *idleWatch
	stop    chan struct{} // closed by Close
	volumes *volumeAPI    // nil on an API server of many hosts
}

// Start opens the data dir, recovers what an earlier server left and starts
// serving. It returns once the API answers.
func Start(ctx context.Context, cfg Config) (_ *Server, retErr error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// First: the API's connection limit is sized from it, and every
	// proxied connection holds two descriptors.
	raiseFileLimit(cfg.Logger)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("making data dir: %w", err)
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if cfg.Store != "" {
		return startAPI(ctx, cfg, dataDir)
	}
	st, err := store.OpenBolt(filepath.Join(dataDir, "withruntime.db"))
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	var u undo.List
	defer u.Run(&retErr)
	u.Add(func() { st.Close() })
	key, made, err := adminKey(ctx, st, dataDir)
	if err != nil {
		return nil, err
	}
	if made && !cfg.Quiet {
		fmt.Fprintf(os.Stderr, "withruntime: created the admin API key in %s (use it as WITHRUNTIME_API_KEY)\n", filepath.Join(dataDir, "admin.key"))
	}
	vault, err := secrets.Open(filepath.Join(dataDir, "secrets.key"), st)
	if err != nil {
		return nil, err
	}
	sealed := sealedHooks{Store: st, vault: vault}
	hooks := newHookService(cfg, sealed)
	tracing, err := openTracing(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	u.Add(func() { tracing(context.WithoutCancel(ctx)) })
	// What the manager and the template builds write appends the
	// webhooks' events.
	recorded := hooks.record(st)
	layers, lib, err := openTemplates(cfg, dataDir, recorded)
	if err != nil {
		return nil, err
	}
	cfg.Manager.Templates = lib
	metrics := hostMetrics(&cfg)
	// One quota (serve --storage-quota-gib) over snapshots and volumes,
	// which the manager checks a snapshot against and the volumes a
	// volume.
	quota := storageQuota(cfg.StorageQuotaBytes, st)
	cfg.Manager.StorageQuota = quota
	mgr, egr, err := startHost(ctx, cfg, dataDir, recorded, vault, sandbox.BackendConfig{DataDir: dataDir, CacheDir: cfg.CacheDir, Layers: layers})
	if err != nil {
		return nil, err
	}
	lib.SetSandboxes(mgr)
	// Builds are in memory: what one in flight when the previous process
	// ended left (its sandboxes, which the manager re-attached) goes.
	lib.StartBuilds()
	u.Add(func() {
		if egr != nil {
			egr.close()
		}
	})
	u.Add(mgr.Close)
	vols, err := openVolumes(ctx, cfg, dataDir, "", st, quota, mgr.DiskPromised)
	if err != nil {
		return nil, err
	}
	u.Add(func() { vols.svc.Close(context.WithoutCancel(ctx)) })
	l, err := listenAPI(cfg)
	if err != nil {
		return nil, err
	}
	watchHost(metrics, mgr, egr)
	u.Add(func() { l.Close() })
	idle := newIdleWatch(cfg.IdleExit, st)
	pv, err := openPreviews(cfg, dataDir, l)
	if err != nil {
		return nil, err
	}
	u.Add(pv.close)
	apiHandler := httpapi.NewServer(httpapi.Config{
		Sandboxes: mgr, Store: st, Logger: cfg.Logger, Secrets: vault, Templates: lib,
		DefaultConcurrency: mgr.DefaultConcurrency(), Trial: cfg.Trial,
		AgentMemory: cfg.agentBudget(),
		DefaultSize: cfg.defaultSize(), MaxKeysPerAccount: cfg.MaxKeysPerAccount,
		PreviewSecret: pv.secret, PreviewDomain: cfg.PreviewDomain, PreviewPort: pv.port,
		Observe: apiObserver(metrics), Hooks: sealed, CheckWebhookURL: hooks.checkURL,
		Volumes: vols,
	})
	s := &Server{
		URL: "http://" + l.Addr().String(), AdminKey: key,
		cfg: cfg, store: st, manager: mgr, egress: egr, tracing: tracing, done: make(chan error, 4),
		volumes: vols,
		idle:    idle, stop: make(chan struct{}),
		// Header and idle timeouts, header bound and connection limit:
		// see admission.Listener.
		http: l.HTTPServer(idle.wrap(pv.route(console.Mount(sdkdist.Mount(cfg.SDKDir, apiHandler)), apiHandler))),
	}
	if pv.l != nil {
		s.preview, s.PreviewURL = pv.l.HTTPServer(idle.wrap(httpapi.PreviewHandler(apiHandler))), "http://"+pv.l.Addr().String()
		// HTTP/2 without TLS too (prior knowledge, as gRPC and curl
		// --http2-prior-knowledge speak it); with TLS a proxy in front
		// offers it.
		s.preview.Protocols = new(http.Protocols)
		s.preview.Protocols.SetHTTP1(true)
		s.preview.Protocols.SetUnencryptedHTTP2(true)
		go func() { s.done <- s.preview.Serve(pv.l) }()
	}
	if cfg.E2BListen != "" {
		e2b, el, err := listenE2B(cfg, dataDir, st, apiHandler, idle.wrap)
		if err != nil {
			return nil, err
		}
		s.e2b, s.E2BURL = e2b, "http://"+el.Addr().String()
		go func() { s.done <- e2b.Serve(el) }()
	}
	if metrics != nil {
		if s.metrics, s.MetricsURL, err = serveMetrics(cfg.MetricsListen, metrics, s.done); err != nil {
			return nil, err
		}
	}
	go func() { s.done <- s.http.Serve(l) }()
	go idle.run(s.stop)
	go collectTemplates(lib, s.stop)
	hooks.run(s.stop)
	s.supervise()
	cfg.Logger.Info("serving", "url", s.URL, "data_dir", dataDir, "backend", cfg.Backend)
	if s.e2b != nil {
		cfg.Logger.Info("serving E2B's API", "url", s.E2BURL, "domain", cfg.E2BDomain)
	}
	if cfg.PreviewDomain != "" {
		cfg.Logger.Info("serving preview URLs", "domain", cfg.PreviewDomain, "url", cmp.Or(s.PreviewURL, s.URL))
	}
	return s, nil
}

// startHost starts what runs sandboxes on this machine: the egress
// services (none with cfg.NoEgress), the backend of bcfg and the manager
// of cfg.Manager over st; then the manager recovers what an earlier
// process left. On failure it leaves nothing open.
func startHost(ctx context.Context, cfg Config, dataDir string, st store.Store, vault *secrets.Vault, bcfg sandbox.BackendConfig) (_ *manager.Manager, _ *egressServices, retErr error) {
	var egr *egressServices
	var err error
	var u undo.List
	defer u.Run(&retErr)
	if !cfg.NoEgress {
		if egr, err = openEgress(cfg, dataDir); err != nil {
			return nil, nil, err
		}
		u.Add(egr.close)
		bcfg.Egress = egr.wiring
	}
	backend, err := newBackend(ctx, cfg, bcfg)
	if err != nil {
		return nil, nil, err
	}
	mcfg := cfg.Manager
	mcfg.Backend, mcfg.Store, mcfg.Logger = backend, st, cfg.Logger
	if mcfg.NodeCompat == "" {
		// A single box: its snapshots are checked against its own later
		// self (a node's compat is set by its registration).
		mcfg.NodeCompat = boxCompat(bcfg.CacheDir)
	}
	mcfg.Snapshots = st
	mcfg.DataDir = dataDir             // disk quotas are admitted against its free space
	mcfg.AdminAccount = DefaultAccount // not held to AccountHostShare
	if egr != nil {
		mcfg.Egress, mcfg.EgressState = true, egr
	}
	if cfg.PricesFile != "" {
		p, err := readPrices(cfg.PricesFile)
		if err != nil {
			return nil, nil, err
		}
		mcfg.Prices = &p
	}
	mgr, err := manager.New(mcfg)
	if err != nil {
		return nil, nil, err
	}
	u.Add(mgr.Close)
	if egr != nil {
		if err := egr.serve(cfg, mgr, vault); err != nil {
			return nil, nil, err
		}
	}
	if err := mgr.Recover(ctx); err != nil {
		return nil, nil, fmt.Errorf("recovering sandboxes: %w", err)
	}
	return mgr, egr, nil
}

// Wait blocks until the context ends or the listener fails, then shuts
// down. Live sandboxes keep running for the next server to reattach.
func (s *Server) Wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-s.done:
	case <-s.idle.fired:
		s.cfg.Logger.Info("exiting: idle with no sandbox alive", "idle_exit", s.cfg.IdleExit)
	}
	return errors.Join(err, s.Close())
}

// Close stops serving and closes the database.
func (s *Server) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	for _, o := range []*http.Server{s.e2b, s.preview, s.metrics} {
		if o != nil && o.Shutdown(ctx) != nil {
			o.Close() // its streams outlived the wait
		}
	}
	if s.manager != nil {
		s.manager.Close()
	}
	if s.volumes != nil {
		if verr := s.volumes.svc.Close(ctx); verr != nil {
			s.cfg.Logger.Warn("unmounting volumes", "err", verr)
		}
	}
	if s.tracing != nil {
		// After the manager: the spans of its last operations go too.
		if terr := s.tracing(ctx); terr != nil {
			s.cfg.Logger.Warn("flushing traces", "err", terr)
		}
	}
	if s.control != nil {
		s.control.Close()
	}
	if s.egress != nil {
		s.egress.close()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.http.Close()
	}
	return errors.Join(err, s.store.Close())
}

// Manager exposes the server's manager (tests).
func (s *Server) Manager() *manager.Manager { return s.manager }

// DataDir is the data dir the server runs on.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// readPrices reads a JSON price table.
func readPrices(path string) (billing.Prices, error) {
	var p billing.Prices
	data, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("reading prices: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("reading prices from %s: %w", path, err)
	}
	return p, p.Validate()
}
