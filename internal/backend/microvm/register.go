package microvm

import (
	"context"
	"errors"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// QEMU's accelerators, the values of the option AccelFlag.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg" // software emulation: slow, for tests and hosts without KVM
	// AccelFlag is the option (serve and node --microvm-accel) that
	// chooses the accelerator.
	AccelFlag = "microvm-accel"
)

func init() {
	sandbox.Register(sandbox.Registration{
		Name: Name,
		New: func(cfg sandbox.BackendConfig) (sandbox.Backend, error) {
			return New(Config{DataDir: cfg.DataDir, CacheDir: cfg.CacheDir, Accel: cfg.Option(AccelFlag), Egress: cfg.Egress, Layers: cfg.Layers})
		},
		Options: []sandbox.Option{{
			Flag:    AccelFlag,
			Usage:   "the microVMs' accelerator: `kvm|tcg` (tcg: software emulation, many times slower; for tests and hosts without KVM)",
			Default: AccelKVM,
			Choices: []string{AccelKVM, AccelTCG},
		}},
		Probe: probe,
		Auto:  autoRank,
	})
}

// probeKVM is ProbeKVM; tests replace it.
var probeKVM = ProbeKVM

// probe fails under KVM when KVM boots no guest here: offered then, every
// create would wait for a boot that never comes. TCG always boots.
func probe(ctx context.Context, cfg sandbox.BackendConfig) error {
	if cfg.Option(AccelFlag) == AccelKVM && !probeKVM(ctx, cfg.CacheDir) {
		return errors.New("KVM boots no guest on this host (--microvm-accel tcg emulates one, slowly)")
	}
	return nil
}

// autoRank puts microVMs ahead of gVisor under KVM, where they boot fast;
// TCG is too slow to be anyone's default.
func autoRank(cfg sandbox.BackendConfig) int {
	if cfg.Option(AccelFlag) == AccelKVM {
		return 1
	}
	return -1
}
