package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// BackendFactory makes a backend from the server's configuration.
type BackendFactory func(cfg BackendConfig) (Backend, error)

// Registration is what a backend tells the platform about itself, so that
// the server chooses, configures and makes backends without naming any.
type Registration struct {
	// Name is the backend's name: the isolation it runs (Spec.Isolation).
	Name string
	// New makes the backend; it fails when the host lacks what the
	// backend needs (binaries, files setup makes).
	New BackendFactory
	// Options are the backend's own settings: each is a flag of serve and
	// node, and New reads its value with BackendConfig.Option.
	Options []Option
	// Probe reports why this host cannot run the backend's sandboxes as
	// cfg sets it up (nil: it can, or there is no probe). It may boot
	// something, so the server calls it only when it needs the answer.
	Probe func(ctx context.Context, cfg BackendConfig) error
	// Auto ranks the backend for the isolation "auto" under cfg: auto is
	// the backend of the highest rank whose probe passes; a rank below 0
	// is never chosen (nil: rank 0).
	Auto func(cfg BackendConfig) int
	// Required is set for the backend a server always runs: when it cannot
	// be made, the server does not start, whichever is the default.
	Required bool
}

// Option is one setting of a backend, given as the flag --<Flag>.
type Option struct {
	Flag    string
	Usage   string
	Default string
	// Choices are the values it takes.
	Choices []string
}

var (
	registryMu sync.Mutex // guards registry
	registry   = map[string]Registration{}
)

// Register makes a backend available by its name. Backends call it from
// their package's init; it does no I/O.
func Register(r Registration) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[r.Name]; dup {
		panic("sandbox: backend registered twice: " + r.Name)
	}
	for _, o := range r.Options {
		for _, other := range registry {
			for _, p := range other.Options {
				if p.Flag == o.Flag {
					panic("sandbox: backend option registered twice: " + o.Flag)
				}
			}
		}
	}
	registry[r.Name] = r
}

// Registrations lists the registered backends, sorted by name.
func Registrations() []Registration {
	registryMu.Lock()
	defer registryMu.Unlock()
	regs := make([]Registration, 0, len(registry))
	for _, r := range registry {
		regs = append(regs, r)
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].Name < regs[j].Name })
	return regs
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	var names []string
	for _, r := range Registrations() {
		names = append(names, r.Name)
	}
	return names
}

// NewBackend makes the backend registered under name.
func NewBackend(name string, cfg BackendConfig) (Backend, error) {
	registryMu.Lock()
	r, ok := registry[name]
	registryMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no backend named %q", name)
	}
	return r.New(cfg)
}

// Options lists every registered backend's options, in the order of
// Registrations.
func Options() []Option {
	var opts []Option
	for _, r := range Registrations() {
		opts = append(opts, r.Options...)
	}
	return opts
}

// Option is the value of the backend option flag: the one set in Options,
// else the option's default ("" for an option no backend registered).
func (c BackendConfig) Option(flag string) string {
	if v, ok := c.Options[flag]; ok {
		return v
	}
	for _, o := range Options() {
		if o.Flag == flag {
			return o.Default
		}
	}
	return ""
}

// CheckOptions reports a value of opts that is not among its option's
// choices, or a flag no registered backend has.
func CheckOptions(opts map[string]string) error {
	all := Options()
	for flag, v := range opts {
		i := slices.IndexFunc(all, func(o Option) bool { return o.Flag == flag })
		if i < 0 {
			return fmt.Errorf("--%s: no backend has this option", flag)
		}
		if o := all[i]; len(o.Choices) > 0 && !slices.Contains(o.Choices, v) {
			return fmt.Errorf("--%s %q: want %s", flag, v, OneOf(o.Choices))
		}
	}
	return nil
}

// OneOf lists choices for a message: "a, b or c".
func OneOf(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}
