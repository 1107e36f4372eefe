package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/withruntime/withruntime/internal/cluster"
	"github.com/withruntime/withruntime/internal/console"
	"github.com/withruntime/withruntime/internal/e2bcompat"
	"github.com/withruntime/withruntime/internal/httpapi"
	"github.com/withruntime/withruntime/internal/promexport"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sdkdist"
	"github.com/withruntime/withruntime/internal/secrets"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/undo"
)

// Names of the installation's values in a shared store (Store.InitValue):
// what a single box keeps in files of its data dir, every process of a
// many-host installation reads from there.
const (
	valueVaultKey = "vault-key"
	valueE2BKey   = "e2b-key"
	// valueAdminMade names the API server that made the installation's
	// first admin key: it is made once per installation, never again by a
	// server that starts on an empty data dir after the operator rotated
	// or removed it.
	valueAdminMade = "first-admin-key"
)

// startAPI is Start on a shared store (--store): an API server of a
// many-host installation. It keeps nothing of its own but the admin key
// file of the first start: sandboxes run on the nodes (internal/node),
// which the control plane (internal/cluster) places creates on and
// forwards every other call to. Any number of these serve one store.
func startAPI(ctx context.Context, cfg Config, dataDir string) (_ *Server, retErr error) {
	st, err := store.Open(ctx, cfg.Store, dataDir)
	if err != nil {
		return nil, err
	}
	forgetStorePassword()
	var u undo.List
	defer u.Run(&retErr)
	u.Add(func() { st.Close() })
	key, made, err := clusterAdminKey(ctx, st, dataDir)
	if err != nil {
		return nil, err
	}
	if made && !cfg.Quiet {
		fmt.Fprintf(os.Stderr, "withruntime: created the admin API key in %s (use it as WITHRUNTIME_API_KEY)\n", filepath.Join(dataDir, "admin.key"))
	}
	ca, err := openAuthority(ctx, st, dataDir, cfg.Quiet)
	if err != nil {
		return nil, err
	}
	vaultKey, err := sharedValue(ctx, st, valueVaultKey, 32)
	if err != nil {
		return nil, err
	}
	vault, err := secrets.OpenKey(vaultKey, st)
	if err != nil {
		return nil, err
	}
	sealed := sealedHooks{Store: st, vault: vault}
	hooks := newHookService(cfg, sealed)
	ctl, err := cluster.New(cluster.Config{
		// What the control plane writes (a lost node's sandboxes ended)
		// appends the webhooks' events too.
		Store: hooks.record(st), Authority: ca, Logger: cfg.Logger, DetectInterval: cfg.DetectInterval,
		DefaultVCPUs: cfg.Manager.DefaultVCPUs, DefaultMemoryMiB: cfg.Manager.DefaultMemoryMiB,
		DefaultDiskMiB: cfg.Manager.DiskMiB, DefaultConcurrency: cfg.Manager.DefaultConcurrency,
	})
	if err != nil {
		return nil, err
	}
	u.Add(func() { ctl.Close() })
	l, err := listenAPI(cfg)
	if err != nil {
		return nil, err
	}
	u.Add(func() { l.Close() })
	idle := newIdleWatch(cfg.IdleExit, st)
	// The API's metrics, the store's health and the node registry: the
	// sandboxes' own are the nodes' (node --metrics-listen).
	var metrics *promexport.Exporter
	if cfg.MetricsListen != "" {
		metrics = promexport.New()
		metrics.WatchCluster(st)
	}
	apiHandler := httpapi.NewServer(httpapi.Config{
		Sandboxes: ctl, Store: st, Logger: cfg.Logger, Secrets: vault, Observe: apiObserver(metrics),
		Volumes: &clusterVolumes{ctl: ctl, st: st}, Hooks: sealed, CheckWebhookURL: hooks.checkURL,
		DefaultConcurrency: ctl.DefaultConcurrency(), Trial: cfg.Trial,
		AgentMemory: cfg.agentBudget(),
		DefaultSize: cfg.defaultSize(), MaxKeysPerAccount: cfg.MaxKeysPerAccount,
	})
	s := &Server{
		URL: "http://" + l.Addr().String(), AdminKey: key,
		cfg: cfg, store: st, control: ctl, done: make(chan error, 3),
		idle: idle, stop: make(chan struct{}),
		http: l.HTTPServer(idle.wrap(console.Mount(sdkdist.Mount(cfg.SDKDir, apiHandler)))),
	}
	if cfg.E2BListen != "" {
		secret, err := sharedValue(ctx, st, valueE2BKey, e2bcompat.SecretSize)
		if err != nil {
			return nil, err
		}
		e2b, el, err := listenE2BWith(cfg, secret, "", st, apiHandler, idle.wrap)
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
	detectCtx, cancel := context.WithCancel(context.Background())
	go func() { <-s.stop; cancel() }()
	go ctl.RunDetector(detectCtx)
	hooks.run(s.stop)
	go ca.RunIssuer(detectCtx, st, issueEvery, cfg.Logger)
	go func() { s.done <- s.http.Serve(l) }()
	go idle.run(s.stop)
	cfg.Logger.Info("serving", "url", s.URL, "data_dir", dataDir, "store", "postgres")
	return s, nil
}

// sharedValue is the installation's value name, made of size random bytes
// by the first process that asks.
func sharedValue(ctx context.Context, st store.Store, name string, size int) ([]byte, error) {
	b := make([]byte, size)
	rand.Read(b)
	v, err := st.InitValue(ctx, name, b)
	if err != nil {
		return nil, fmt.Errorf("reading the installation's %s: %w", name, err)
	}
	if len(v) != size {
		return nil, fmt.Errorf("the installation's %s is %d bytes, want %d", name, len(v), size)
	}
	return v, nil
}

// errAdminExists refuses a second first admin key.
var errAdminExists = errors.New("the store has an admin key")

// clusterAdminKey is adminKey for a shared store: the first API server to
// start on a new store makes the admin key and writes it to DIR/admin.key;
// every other start makes none (their operator uses the first's, or keys
// made with it), even once that key is removed. A data dir whose
// admin.key the store knows keeps it.
func clusterAdminKey(ctx context.Context, st store.Store, dataDir string) (key string, made bool, err error) {
	path := filepath.Join(dataDir, "admin.key")
	if key, ok, err := knownKey(ctx, st, path); ok || err != nil {
		return key, false, err
	}
	key, sum := newAdminSecret()
	// The claim is the key's hash: of servers starting together on a new
	// store one wins, and every later start finds the claim made.
	claim, err := st.InitValue(ctx, valueAdminMade, sum[:])
	if err != nil {
		return "", false, fmt.Errorf("reading the installation's first admin key: %w", err)
	}
	if !bytes.Equal(claim, sum[:]) {
		// Another start claimed it. Unless it died before making the key
		// (no admin key anywhere: the last one is never removed), this
		// start makes none.
		keys, err := st.ListKeys(ctx, "")
		if err != nil {
			return "", false, err
		}
		for _, k := range keys {
			if k.Kind == store.KeyAdmin {
				return "", false, nil
			}
		}
	}
	now := time.Now().UTC()
	err = st.CreateAccount(ctx, store.Account{ID: DefaultAccount, Name: DefaultAccount, CreatedAt: now})
	if err != nil && sandbox.KindOf(err) != sandbox.KindConflict {
		return "", false, err
	}
	k := firstAdminKey(sum, now)
	err = st.PutKeyIf(ctx, k, func(keys []store.Key) error {
		for _, o := range keys {
			if o.Kind == store.KeyAdmin || o.ID == k.ID {
				return errAdminExists
			}
		}
		return nil
	})
	if errors.Is(err, errAdminExists) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return key, true, writeKeyFile(path, key)
}
