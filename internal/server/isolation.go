package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/withruntime/withruntime/internal/backend/microvm" // registers "microvm"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Isolation settings of Config.Isolation.
const (
	IsolationAuto = "auto"
	AccelKVM      = "kvm"
	AccelTCG      = "tcg"
)

// probeKVM says whether microVMs boot with KVM on this host, and
// registered and makeBackend are the backend registry's; tests replace
// them.
var (
	probeKVM    = microvm.ProbeKVM
	registered  = sandbox.Backends
	makeBackend = sandbox.NewBackend
)

// defaultIsolation is the isolation a create without one gets: Isolation
// when it names one, for auto microvm exactly when KVM boots a guest here
// (TCG is too slow to be anyone's default), and without Isolation the
// Backend the configuration names.
func defaultIsolation(ctx context.Context, cfg Config, kvm func() bool) string {
	switch cfg.Isolation {
	case "":
		return cfg.Backend
	case IsolationAuto:
		if cfg.MicroVMAccel == AccelKVM && kvm() {
			return sandbox.IsolationMicroVM
		}
		return sandbox.IsolationGVisor
	default:
		return cfg.Isolation
	}
}

// newBackend makes the backend of every isolation this server runs:
// gvisor always, microvm when it is built in and set up on this host and
// can boot a guest (under KVM: when the probe says KVM works; else a
// warning, unless it is the default: then starting fails), and the
// default's, whatever it is. More than one is a sandbox.Multi.
func newBackend(ctx context.Context, cfg Config, bcfg sandbox.BackendConfig) (sandbox.Backend, error) {
	bcfg.MicroVMAccel = cfg.MicroVMAccel
	var probed, kvmOK bool
	kvm := func() bool {
		if !probed {
			probed, kvmOK = true, probeKVM(ctx, cfg.CacheDir)
		}
		return kvmOK
	}
	def := defaultIsolation(ctx, cfg, kvm)
	names := []string{def}
	for _, n := range []string{sandbox.IsolationGVisor, sandbox.IsolationMicroVM} {
		if n == def || !slices.Contains(registered(), n) {
			continue
		}
		// Offered under a KVM that boots nothing, every create of it
		// would wait for a boot that never comes.
		if n == sandbox.IsolationMicroVM && cfg.MicroVMAccel == AccelKVM && !kvm() {
			cfg.Logger.Warn("running without an isolation", "isolation", n, "err", "KVM boots no guest on this host (--microvm-accel tcg emulates one, slowly)")
			continue
		}
		names = append(names, n)
	}
	var backends []sandbox.Backend
	for _, n := range names {
		b, err := makeBackend(n, bcfg)
		switch {
		case err == nil:
			backends = append(backends, b)
		case n == def:
			return nil, fmt.Errorf("the default isolation %s: %w", n, err)
		case n == sandbox.IsolationGVisor:
			return nil, err
		default:
			cfg.Logger.Warn("running without an isolation", "isolation", n, "err", err)
		}
	}
	cfg.Logger.Info("isolation", "default", def, "offered", len(backends))
	if len(backends) == 1 {
		return backends[0], nil
	}
	return sandbox.NewMulti(def, backends...)
}
