package sandbox

import (
	"context"
	"reflect"
	"testing"
)

// A backend with every capability is called for each; the adapter adds
// nothing of its own.
func TestAdapterDelegates(t *testing.T) {
	ctx := context.Background()
	full := &fullBackend{recBackend{name: IsolationGVisor}}
	a := Adapt(full)
	if Adapt(a) != a {
		t.Fatal("Adapt of an Adapter: got a new one, want the same")
	}
	if a.Unwrap() != Backend(full) {
		t.Fatal("Unwrap: got another backend than the one wrapped")
	}
	for _, c := range []Capability{CapMeter, CapWarm, CapNetwork, CapFreeze, CapDigest} {
		if !a.Supports(c) {
			t.Errorf("Supports(%s): got false for a backend that has it", c)
		}
	}
	if a.Supports("teleport") {
		t.Error("Supports of an unknown capability: got true")
	}
	if cpu, err := a.CPUTime("a"); cpu.Seconds() != 1 || err != nil {
		t.Errorf("CPUTime: got %v, %v; want the backend's 1s", cpu, err)
	}
	a.StartWarm(ctx, "a", Spec{})
	a.Claim(ctx, "a")
	if _, ok := a.SandboxAddr("a"); !ok {
		t.Error("SandboxAddr: got none, want the backend's")
	}
	a.SetOnline("a", true)
	a.Freeze(ctx, "a")
	a.Thaw(ctx, "a")
	if d := a.CheckpointDigest("a"); d != "sha256:1" {
		t.Errorf("CheckpointDigest: got %q, want the backend's", d)
	}
	a.ResumeDigest(ctx, "a", Spec{}, "sha256:1")
	want := []string{"cpu a", "startwarm a", "claim a", "addr a", "online a", "freeze a", "thaw a", "digest a", "resumedigest a"}
	if got := full.calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls: got %v, want %v", got, want)
	}
	if got := a.Offered(); !reflect.DeepEqual(got, []string{IsolationGVisor}) {
		t.Errorf("Offered of a plain backend: got %v, want its own name", got)
	}
}

// A backend without the capabilities gets the platform's answer for each:
// a fallback where the platform has one, else not_supported.
func TestAdapterWithout(t *testing.T) {
	ctx := context.Background()
	plain := &recBackend{name: IsolationMicroVM}
	a := Adapt(plain)
	for _, c := range []Capability{CapMeter, CapWarm, CapNetwork, CapFreeze, CapDigest} {
		if a.Supports(c) {
			t.Errorf("Supports(%s): got true for a backend without it", c)
		}
	}
	if cpu, err := a.CPUTime("a"); cpu != 0 || err != nil {
		t.Errorf("CPUTime: got %v, %v; want 0 and no error (memory billed only)", cpu, err)
	}
	if _, err := a.StartWarm(ctx, "a", Spec{}); err != nil {
		t.Errorf("StartWarm: %v", err)
	}
	if err := a.Claim(ctx, "a"); err != nil {
		t.Errorf("Claim: got %v, want nothing to do", err)
	}
	if _, ok := a.SandboxAddr("a"); ok {
		t.Error("SandboxAddr: got an address from a backend without network")
	}
	if d := a.CheckpointDigest("a"); d != "" {
		t.Errorf("CheckpointDigest: got %q, want none", d)
	}
	if _, err := a.ResumeDigest(ctx, "a", Spec{}, ""); err != nil {
		t.Errorf("ResumeDigest without a digest: %v", err)
	}
	for name, err := range map[string]error{
		"SetOnline": a.SetOnline("a", true),
		"Freeze":    a.Freeze(ctx, "a"),
		"Thaw":      a.Thaw(ctx, "a"),
		"ResumeDigest with a digest": func() error {
			_, err := a.ResumeDigest(ctx, "a", Spec{}, "sha256:1")
			return err
		}(),
	} {
		if KindOf(err) != KindNotSupported {
			t.Errorf("%s: got %v, want kind %s", name, err, KindNotSupported)
		}
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close of a backend without one: %v", err)
	}
	want := []string{"start a", "resume a"}
	if got := plain.calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls: got %v, want %v", got, want)
	}
}

// A Multi wrapped in an Adapter offers its isolations and keeps every
// capability (its own adapters answer per backend).
func TestAdapterOfMulti(t *testing.T) {
	m, _, _ := newTestMulti(t)
	a := Adapt(m)
	if got, want := a.Offered(), []string{IsolationGVisor, IsolationMicroVM}; !reflect.DeepEqual(got, want) {
		t.Errorf("Offered: got %v, want %v", got, want)
	}
	for _, c := range []Capability{CapMeter, CapWarm, CapNetwork, CapFreeze, CapDigest} {
		if !a.Supports(c) {
			t.Errorf("Supports(%s): got false for a Multi", c)
		}
	}
}
