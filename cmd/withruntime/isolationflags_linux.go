package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/server"
)

// isolationFlags registers the flags of the sandboxes' isolation, which
// serve and node share: --isolation, whose choices are auto and every
// registered backend, and each backend's own options (sandbox.Option).
func isolationFlags(fs *pflag.FlagSet, cfg *server.Config) {
	cfg.Isolation = server.IsolationAuto
	fs.Var(&choice{&cfg.Isolation, append([]string{server.IsolationAuto}, sandbox.Backends()...)}, "isolation",
		"the isolation of a sandbox created without one: `auto|gvisor|microvm` (auto: microvm when KVM boots a guest on this host, else gvisor)")
	cfg.BackendOptions = map[string]string{}
	for _, o := range sandbox.Options() {
		cfg.BackendOptions[o.Flag] = o.Default
		fs.Var(&optionFlag{cfg.BackendOptions, o}, o.Flag, o.Usage)
	}
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

// optionFlag is the flag of a backend's option: its value is kept in the
// map of every backend's options.
type optionFlag struct {
	values map[string]string
	opt    sandbox.Option
}

func (f *optionFlag) String() string { return f.values[f.opt.Flag] }
func (f *optionFlag) Type() string   { return "string" }

func (f *optionFlag) Set(v string) error {
	if len(f.opt.Choices) > 0 && !slices.Contains(f.opt.Choices, v) {
		return fmt.Errorf("want %s", strings.Join(f.opt.Choices, ", "))
	}
	f.values[f.opt.Flag] = v
	return nil
}
