package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/server"
)

// isolationFlags registers the flags of the sandboxes' isolation, which
// serve and node share.
func isolationFlags(fs *pflag.FlagSet, cfg *server.Config) {
	cfg.Isolation, cfg.MicroVMAccel = server.IsolationAuto, server.AccelKVM
	fs.Var(&choice{&cfg.Isolation, []string{server.IsolationAuto, "gvisor", "microvm"}}, "isolation",
		"the isolation of a sandbox created without one: `auto|gvisor|microvm` (auto: microvm when KVM boots a guest on this host, else gvisor)")
	fs.Var(&choice{&cfg.MicroVMAccel, []string{server.AccelKVM, server.AccelTCG}}, "microvm-accel",
		"the microVMs' accelerator: `kvm|tcg` (tcg: software emulation, many times slower; for tests and hosts without KVM)")
}

// choice is a string flag that takes one of a few values.
type choice struct {
	p       *string
	allowed []string
}

func (c *choice) String() string { return *c.p }
func (c *choice) Type() string   { return "string" }

func (c *choice) Set(v string) error {
	if !slices.Contains(c.allowed, v) {
		return fmt.Errorf("want %s", strings.Join(c.allowed, ", "))
	}
	*c.p = v
	return nil
}
