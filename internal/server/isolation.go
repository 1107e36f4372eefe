package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// IsolationAuto is the Config.Isolation that lets the host choose: the
// registered backend that ranks highest for it (sandbox.Registration's
// Auto) and whose probe passes.
const IsolationAuto = "auto"

// registrations is the backend registry; tests replace it.
var registrations = sandbox.Registrations

// isolationChoices are the values of Config.Isolation besides "": auto
// and every registered backend.
func isolationChoices() []string {
	choices := []string{IsolationAuto}
	for _, r := range registrations() {
		choices = append(choices, r.Name)
	}
	return choices
}

// requiredIsolation is the backend every server runs (Registration's
// Required), the isolation of a configuration that names none.
func requiredIsolation() string {
	for _, r := range registrations() {
		if r.Required {
			return r.Name
		}
	}
	return ""
}

// defaultIsolation is the isolation a create without one gets: Isolation
// when it names one, for auto the registered backend of the highest rank
// under bcfg whose probe passes, and without Isolation the Backend the
// configuration names.
func defaultIsolation(cfg Config, bcfg sandbox.BackendConfig, regs []sandbox.Registration, probe func(sandbox.Registration) error) (string, error) {
	switch cfg.Isolation {
	case "":
		return cfg.Backend, nil
	case IsolationAuto:
	default:
		return cfg.Isolation, nil
	}
	type ranked struct {
		reg  sandbox.Registration
		rank int
	}
	var candidates []ranked
	for _, r := range regs {
		rank := 0
		if r.Auto != nil {
			rank = r.Auto(bcfg)
		}
		if rank >= 0 {
			candidates = append(candidates, ranked{r, rank})
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool { return candidates[i].rank > candidates[j].rank })
	for _, c := range candidates {
		if probe(c.reg) == nil {
			return c.reg.Name, nil
		}
	}
	return "", errors.New("isolation auto: no registered backend runs on this host")
}

// newBackend makes the backend of every isolation this server runs: the
// default's, whatever it is, and every other registered backend whose
// probe passes on this host and that can be made (else a warning; a
// Required one that cannot be made fails the start). More than one is a
// sandbox.Multi.
func newBackend(ctx context.Context, cfg Config, bcfg sandbox.BackendConfig) (sandbox.Backend, error) {
	bcfg.Options = cfg.BackendOptions
	regs := registrations()
	// A probe may boot something: each runs once, and only when its
	// answer is needed.
	probed := map[string]error{}
	probe := func(r sandbox.Registration) error {
		if r.Probe == nil {
			return nil
		}
		err, ok := probed[r.Name]
		if !ok {
			err = r.Probe(ctx, bcfg)
			probed[r.Name] = err
		}
		return err
	}
	def, err := defaultIsolation(cfg, bcfg, regs, probe)
	if err != nil {
		return nil, err
	}
	var backends []sandbox.Backend
	add := func(r sandbox.Registration) error {
		b, err := r.New(bcfg)
		if err == nil {
			backends = append(backends, b)
		}
		return err
	}
	i := slices.IndexFunc(regs, func(r sandbox.Registration) bool { return r.Name == def })
	if i < 0 {
		return nil, fmt.Errorf("the default isolation %s: no backend named %q", def, def)
	}
	if err := add(regs[i]); err != nil {
		return nil, fmt.Errorf("the default isolation %s: %w", def, err)
	}
	for _, r := range regs {
		if r.Name == def {
			continue
		}
		// Offered where it cannot run, every create of it would wait for
		// a boot that never comes.
		if err := probe(r); err != nil {
			cfg.Logger.Warn("running without an isolation", "isolation", r.Name, "err", err)
			continue
		}
		if err := add(r); err != nil {
			if r.Required {
				return nil, err
			}
			cfg.Logger.Warn("running without an isolation", "isolation", r.Name, "err", err)
		}
	}
	cfg.Logger.Info("isolation", "default", def, "offered", len(backends))
	if len(backends) == 1 {
		return backends[0], nil
	}
	return sandbox.NewMulti(def, backends...)
}
