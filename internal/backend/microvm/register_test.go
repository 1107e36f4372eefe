package microvm

import (
	"context"
	"slices"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// The registration carries what the server used to know of microVMs: the
// accelerator flag, that auto takes them under a KVM that boots a guest
// only, and the probe that says whether it does.
func TestRegistration(t *testing.T) {
	i := slices.IndexFunc(sandbox.Registrations(), func(r sandbox.Registration) bool { return r.Name == Name })
	if i < 0 {
		t.Fatal("microvm is not registered")
	}
	r := sandbox.Registrations()[i]
	if len(r.Options) != 1 || r.Options[0].Flag != AccelFlag || r.Options[0].Default != AccelKVM || !slices.Equal(r.Options[0].Choices, []string{AccelKVM, AccelTCG}) {
		t.Errorf("options: got %+v, want --microvm-accel kvm|tcg, default kvm", r.Options)
	}
	if r.Required {
		t.Error("microvm is required: a server without KVM or its files would not start")
	}
	kvm := sandbox.BackendConfig{} // the default: kvm
	tcg := sandbox.BackendConfig{Options: map[string]string{AccelFlag: AccelTCG}}
	if got := r.Auto(kvm); got <= 0 {
		t.Errorf("auto rank under kvm: got %d, want above gvisor's 0", got)
	}
	if got := r.Auto(tcg); got >= 0 {
		t.Errorf("auto rank under tcg: got %d, want below 0 (never the default)", got)
	}

	old := probeKVM
	t.Cleanup(func() { probeKVM = old })
	probed := 0
	works := false
	probeKVM = func(context.Context, string) bool { probed++; return works }
	if err := r.Probe(t.Context(), kvm); err == nil {
		t.Error("probe under a KVM that boots nothing: got no error")
	}
	works = true
	if err := r.Probe(t.Context(), kvm); err != nil {
		t.Errorf("probe under a working KVM: %v", err)
	}
	if err := r.Probe(t.Context(), tcg); err != nil || probed != 2 {
		t.Errorf("probe under tcg: got %v after %d KVM probes, want no error and no KVM probe", err, probed)
	}
}
