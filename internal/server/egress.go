package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/undo"
)

// egressServices are the host's side of every sandbox's network: the
// proxy's and the resolver's listeners, the certificate authority and the
// log. The listeners come first (the packet rules need their ports), the
// proxy serves once the manager (its Directory) exists.
type egressServices struct {
	tcp    *net.TCPListener
	dnsTCP *net.TCPListener
	dnsUDP *net.UDPConn
	ca     *egress.CA
	log    *egress.Log
	proxy  atomic.Pointer[egress.Proxy]
	wiring *sandbox.EgressWiring
	cancel context.CancelFunc

	// failed gets the error of a service that stopped while the server
	// was not closing; stopped is closed by close.
	failed    chan error
	stopped   chan struct{}
	closing   atomic.Bool
	closeOnce sync.Once
}

// openEgress listens for redirected traffic and prepares the authority
// and the trust bundle sandboxes mount.
func openEgress(cfg Config, dataDir string) (_ *egressServices, retErr error) {
	e := &egressServices{log: egress.NewLog(), failed: make(chan error, 2), stopped: make(chan struct{})}
	var u undo.List
	defer u.Run(&retErr)
	u.Add(e.close)
	var err error
	// Any address: the packet rules redirect to the address of each
	// sandbox's host end, and drop everything else that comes for these
	// ports, which they know by the listeners' mark.
	if e.tcp, err = network.ListenTCP(&net.TCPAddr{}); err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	for i := 0; i < 20 && e.dnsUDP == nil; i++ {
		if e.dnsTCP, err = network.ListenTCP(&net.TCPAddr{}); err != nil {
			return nil, fmt.Errorf("egress resolver: %w", err)
		}
		port := e.dnsTCP.Addr().(*net.TCPAddr).Port
		if e.dnsUDP, err = network.ListenUDP(&net.UDPAddr{Port: port}); err != nil {
			e.dnsTCP.Close()
			e.dnsTCP, e.dnsUDP = nil, nil
		}
	}
	if e.dnsUDP == nil {
		return nil, errors.New("egress resolver: no port free for both UDP and TCP")
	}
	growReadBuffer(e.dnsUDP, dnsReadBuffer, cfg.Logger)
	caDir := filepath.Join(dataDir, "ca")
	if e.ca, err = egress.LoadOrCreateCA(caDir); err != nil {
		return nil, err
	}
	// What a sandbox trusts besides the image's roots: the platform's
	// authority and the operator's --sandbox-ca certificates. A new slice,
	// so that the authority's own PEM is never appended to.
	trust := append([]byte(nil), e.ca.CertPEM()...)
	for _, path := range cfg.SandboxCA {
		pemBytes, err := egress.ReadSandboxCA(path)
		if err != nil {
			return nil, fmt.Errorf("--sandbox-ca: %w", err)
		}
		trust = append(trust, pemBytes...)
	}
	bundle, err := writeBundle(cfg.CacheDir, caDir, trust)
	if err != nil {
		return nil, err
	}
	caCert := filepath.Join(caDir, "ca.pem")
	if len(cfg.SandboxCA) > 0 {
		// NODE_EXTRA_CA_CERTS names the file mounted at CACertPath, which
		// must then hold the operator's certificates too.
		if caCert, err = writeFileAtomic(filepath.Join(caDir, "trust.pem"), trust); err != nil {
			return nil, err
		}
	}
	tag, err := networkTag(dataDir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	// One plumbing for every backend of the server (sandbox.Multi's
	// included): they share its table and its addresses.
	e.wiring = &sandbox.EgressWiring{
		Net: network.New(network.Config{
			Name:      tag,
			ProxyPort: e.tcp.Addr().(*net.TCPAddr).Port,
			DNSPort:   e.dnsTCP.Addr().(*net.TCPAddr).Port,
		}),
		CABundle: bundle,
		CACert:   caCert,
	}
	return e, nil
}

// writeBundle writes the image's trusted roots plus the platform's
// authority: what a sandbox trusts.
func writeBundle(cacheDir, caDir string, caPEM []byte) (string, error) {
	rootfs, err := image.Rootfs(cacheDir, image.DefaultName)
	if err != nil {
		return "", err
	}
	system, err := os.ReadFile(filepath.Join(rootfs, "etc", "ssl", "certs", "ca-certificates.crt"))
	if err != nil {
		return "", fmt.Errorf("reading the image's trusted roots: %w", err)
	}
	return writeFileAtomic(filepath.Join(caDir, "bundle.pem"), append(append(system, '\n'), caPEM...))
}

// writeFileAtomic replaces path with b (readable by all: sandboxes mount
// it read-only) and returns path. A new file, renamed over the old: a
// sandbox that mounted the old one keeps what it trusted when it started.
func writeFileAtomic(path string, b []byte) (string, error) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// serve starts the proxy and the resolver, supervised: if either stops
// while the server is not closing, the error is logged and sent on
// e.failed, which ends the server (superviseEgress).
func (e *egressServices) serve(cfg Config, dir egress.Directory, secrets egress.Secrets) error {
	var hosts egress.Hosts
	if cfg.EgressHosts != "" {
		h, err := egress.LoadHostsFile(cfg.EgressHosts)
		if err != nil {
			return err
		}
		hosts = h
	}
	var roots []byte
	if cfg.EgressCA != "" {
		b, err := os.ReadFile(cfg.EgressCA)
		if err != nil {
			return fmt.Errorf("reading --egress-ca: %w", err)
		}
		roots = b
	}
	proxy, err := egress.NewProxy(egress.Config{
		Directory:   dir,
		OriginalDst: network.OriginalDst,
		Secrets:     secrets,
		CA:          e.ca,
		Hosts:       hosts,
		ExtraRoots:  roots,
		Log:         e.log,
		Logger:      cfg.Logger,
		Permit:      cfg.EgressPermit,

		MaxConns:            cfg.EgressMaxConns,
		MaxConnsAccount:     cfg.EgressMaxConnsAccount,
		MaxConnsHost:        egressBudget(cfg, cfg.Logger),
		IdleTimeout:         cfg.EgressIdleTimeout,
		DNSQueriesPerSecond: cfg.EgressDNSRate,
	})
	if err != nil {
		return err
	}
	if cfg.EgressDNSRate > network.DNSPacketsPerSecond {
		cfg.Logger.Warn("egress: the packet rules drop a sandbox's DNS over UDP past their own rate, below --egress-dns-rate",
			"egress_dns_rate", cfg.EgressDNSRate, "packets_per_second", network.DNSPacketsPerSecond)
	}
	e.proxy.Store(proxy)
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go e.supervise(cfg.Logger, "egress proxy", func() error { return proxy.Serve(e.tcp) })
	go e.supervise(cfg.Logger, "egress resolver", func() error { return proxy.ServeDNS(ctx, e.dnsUDP, e.dnsTCP) })
	return nil
}

// supervise runs one egress service. Its loops retry every error but a
// closed socket, so a return while the server is not closing means the
// service is gone: every sandbox's egress with it. Rather than run on half
// alive, the server is told to shut down.
func (e *egressServices) supervise(log *slog.Logger, what string, run func() error) {
	err := run()
	if e.closing.Load() {
		return
	}
	if err == nil {
		err = errors.New("stopped")
	}
	err = fmt.Errorf("%s: %w", what, err)
	log.Error("egress service failed: shutting the server down", "service", what, "err", err)
	e.failed <- err
}

// superviseEgress ends Wait with the error of an egress service that
// failed.
func (s *Server) superviseEgress() {
	if s.egress == nil {
		return
	}
	go func() {
		select {
		case err := <-s.egress.failed:
			select {
			case s.done <- err:
			default: // the API failed too: Wait has an error already
			}
		case <-s.egress.stopped:
		}
	}()
}

// Events is a sandbox's egress log.
func (e *egressServices) Events(id string) []egress.Event { return e.log.Events(id) }

// Release closes the connections an ended sandbox still has through the
// proxy and forgets what the proxy holds for it.
func (e *egressServices) Release(id string) {
	if p := e.proxy.Load(); p != nil {
		p.Release(id)
	}
}

// CloseFlows closes the connections of a sandbox that stopped running but
// may resume (a pause), keeping what the proxy knows for it.
func (e *egressServices) CloseFlows(id string) {
	if p := e.proxy.Load(); p != nil {
		p.CloseFlows(id)
	}
}

func (e *egressServices) close() {
	e.closing.Store(true)
	e.closeOnce.Do(func() { close(e.stopped) })
	if e.cancel != nil {
		e.cancel()
	}
	if p := e.proxy.Load(); p != nil {
		p.Close()
	}
	for _, c := range []interface{ Close() error }{e.tcp, e.dnsTCP, e.dnsUDP} {
		if c != nil && !isNilCloser(c) {
			c.Close()
		}
	}
}

func isNilCloser(c interface{ Close() error }) bool {
	switch v := c.(type) {
	case *net.TCPListener:
		return v == nil
	case *net.UDPConn:
		return v == nil
	}
	return false
}
