package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// stubBackend is a backend that is only a name: these tests choose
// backends, they run none.
type stubBackend struct {
	sandbox.Backend
	name string
}

func (b stubBackend) Name() string { return b.name }

const accelFlag = "microvm-accel"

// stubRegistry replaces the registry with the backends named, registered
// as gVisor and the microVM register themselves (gvisor required; microvm
// ranked first by auto under kvm, and probed there with kvm), whose
// factories fail with failing[name]; it returns the accelerators the
// factories were given.
func stubRegistry(t *testing.T, names []string, failing map[string]error, kvm bool) *[]string {
	t.Helper()
	old := registrations
	t.Cleanup(func() { registrations = old })
	var accels []string
	factory := func(name string) sandbox.BackendFactory {
		return func(cfg sandbox.BackendConfig) (sandbox.Backend, error) {
			accels = append(accels, cfg.Options[accelFlag])
			if err := failing[name]; err != nil {
				return nil, err
			}
			return stubBackend{name: name}, nil
		}
	}
	all := map[string]sandbox.Registration{
		"gvisor": {Name: "gvisor", New: factory("gvisor"), Required: true},
		"microvm": {
			Name: "microvm", New: factory("microvm"),
			Auto: func(cfg sandbox.BackendConfig) int {
				if cfg.Options[accelFlag] == "kvm" {
					return 1
				}
				return -1
			},
			Probe: func(_ context.Context, cfg sandbox.BackendConfig) error {
				if cfg.Options[accelFlag] == "kvm" && !kvm {
					return errors.New("KVM boots no guest on this host")
				}
				return nil
			},
		},
	}
	var regs []sandbox.Registration
	for _, n := range names {
		regs = append(regs, all[n])
	}
	registrations = func() []sandbox.Registration { return regs }
	return &accels
}

func TestDefaultIsolation(t *testing.T) {
	tests := []struct {
		name      string
		isolation string
		backend   string
		accel     string
		kvm       bool
		want      string
	}{
		{"auto with KVM", "auto", "gvisor", "kvm", true, "microvm"},
		{"auto without KVM", "auto", "gvisor", "kvm", false, "gvisor"},
		{"auto under TCG", "auto", "gvisor", "tcg", true, "gvisor"},
		{"gvisor", "gvisor", "gvisor", "kvm", true, "gvisor"},
		{"microvm", "microvm", "gvisor", "tcg", false, "microvm"},
		{"none: the Backend", "", "microvm", "tcg", false, "microvm"},
	}
	for _, tt := range tests {
		stubRegistry(t, []string{"gvisor", "microvm"}, nil, tt.kvm)
		cfg := Config{Isolation: tt.isolation, Backend: tt.backend}
		bcfg := sandbox.BackendConfig{Options: map[string]string{accelFlag: tt.accel}}
		probe := func(r sandbox.Registration) error {
			if r.Probe == nil {
				return nil
			}
			return r.Probe(t.Context(), bcfg)
		}
		if got, err := defaultIsolation(cfg, bcfg, registrations(), probe); err != nil || got != tt.want {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestNewBackendIsolations(t *testing.T) {
	both := []string{"gvisor", "microvm"}
	notSetUp := map[string]error{"microvm": errors.New("microvm kernel is missing: run `withruntime setup`")}
	tests := []struct {
		name      string
		names     []string
		failing   map[string]error
		isolation string
		accel     string
		kvm       bool
		wantErr   string   // "": starts
		want      []string // the isolations offered
		wantWarn  bool
	}{
		{"both under tcg", both, nil, "gvisor", "tcg", false, "", both, false},
		{"both under a working kvm", both, nil, "gvisor", "kvm", true, "", both, false},
		{"microvm under a kvm that boots nothing", both, nil, "gvisor", "kvm", false, "", []string{"gvisor"}, true},
		{"auto under a working kvm", both, nil, "auto", "kvm", true, "", both, false},
		{"auto under a kvm that boots nothing", both, nil, "auto", "kvm", false, "", []string{"gvisor"}, true},
		{"microvm the default", both, nil, "microvm", "tcg", false, "", both, false},
		{"microvm not set up", both, notSetUp, "gvisor", "tcg", false, "", []string{"gvisor"}, true},
		{"microvm not built in", []string{"gvisor"}, nil, "gvisor", "tcg", false, "", []string{"gvisor"}, false},
		{"microvm the default, not set up", both, notSetUp, "microvm", "tcg", false, "kernel is missing", nil, false},
		{"microvm the default, not built in", []string{"gvisor"}, nil, "microvm", "tcg", false, "no backend", nil, false},
		{"gvisor broken", both, map[string]error{"gvisor": errors.New("runsc is missing")}, "microvm", "tcg", false, "runsc is missing", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			accels := stubRegistry(t, tt.names, tt.failing, tt.kvm)
			var log bytes.Buffer
			cfg := Config{Isolation: tt.isolation, BackendOptions: map[string]string{accelFlag: tt.accel}, Logger: slog.New(slog.NewTextHandler(&log, nil))}
			b, err := newBackend(t.Context(), cfg, sandbox.BackendConfig{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantDef := tt.isolation
			if wantDef == "auto" {
				wantDef = map[bool]string{true: "microvm", false: "gvisor"}[tt.kvm]
			}
			if b.Name() != wantDef {
				t.Errorf("default: got %q, want %q", b.Name(), wantDef)
			}
			got := []string{b.Name()}
			if m, ok := b.(*sandbox.Multi); ok {
				got = m.Offered()
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("offered: got %v, want %v", got, tt.want)
			}
			if warned := strings.Contains(log.String(), "running without an isolation"); warned != tt.wantWarn {
				t.Errorf("warned: got %v, want %v (log: %s)", warned, tt.wantWarn, log.String())
			}
			for _, a := range *accels {
				if a != tt.accel {
					t.Errorf("a backend was given accelerator %q, want %q", a, tt.accel)
				}
			}
		})
	}
}
