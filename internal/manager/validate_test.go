package manager

import (
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

func TestSpecFor(t *testing.T) {
	m := &Manager{cfg: Config{Backend: namedFake{newFakeBackend(), sandbox.IsolationGVisor}}}
	m.cfg.setDefaults()
	maxCost, negCost := int64(1), int64(-1)
	gib := func(n int) *int { return &n }
	tests := []struct {
		name     string
		req      service.CreateRequest
		wantKind sandbox.Kind // "" means accepted
		check    func(sandbox.Spec) bool
	}{
		{"defaults", service.CreateRequest{}, "", func(s sandbox.Spec) bool {
			return s.Isolation == sandbox.IsolationGVisor && s.VCPUs == 2 && s.MemoryMiB == 4096 && s.Timeout == 300*time.Second && s.OnLeaseEnd == sandbox.OnLeaseEndStop && s.Image == "default"
		}},
		{"explicit size", service.CreateRequest{VCPUs: 8, MemoryMiB: 16384, TimeoutSeconds: 86400, OnLeaseEnd: "pause"}, "", func(s sandbox.Spec) bool {
			return s.VCPUs == 8 && s.MemoryMiB == 16384 && s.Timeout == 24*time.Hour && s.OnLeaseEnd == sandbox.OnLeaseEndPause
		}},
		{"vcpus above the limit", service.CreateRequest{VCPUs: 9}, sandbox.KindInvalid, nil},
		{"negative vcpus", service.CreateRequest{VCPUs: -1}, sandbox.KindInvalid, nil},
		{"memory below the limit", service.CreateRequest{MemoryMiB: 511}, sandbox.KindInvalid, nil},
		{"memory above the limit", service.CreateRequest{MemoryMiB: 16385}, sandbox.KindInvalid, nil},
		{"lease above the limit", service.CreateRequest{TimeoutSeconds: 86401}, sandbox.KindInvalid, nil},
		{"negative lease", service.CreateRequest{TimeoutSeconds: -5}, sandbox.KindInvalid, nil},
		{"unknown lease action", service.CreateRequest{OnLeaseEnd: "hibernate"}, sandbox.KindInvalid, nil},
		{"unknown template", service.CreateRequest{Image: "alpine"}, sandbox.KindNotFound, nil},
		{"a template name of the wrong shape", service.CreateRequest{Image: "Alpine/x/y"}, sandbox.KindInvalid, nil},
		{"env name with =", service.CreateRequest{Env: map[string]string{"A=B": "x"}}, sandbox.KindInvalid, nil},
		{"env name with a comma", service.CreateRequest{Env: map[string]string{"A,B": "x"}}, sandbox.KindInvalid, nil},
		{"env name starting with a digit", service.CreateRequest{Env: map[string]string{"1A": "x"}}, sandbox.KindInvalid, nil},
		{"env value with NUL", service.CreateRequest{Env: map[string]string{"A": "x\x00"}}, sandbox.KindInvalid, nil},
		{"metadata key too long", service.CreateRequest{Metadata: map[string]string{strings.Repeat("k", 129): "v"}}, sandbox.KindInvalid, nil},
		{"internet on a server without egress", service.CreateRequest{Network: sandbox.Network{Internet: true}}, sandbox.KindNotSupported, nil},
		{"an allow list without internet", service.CreateRequest{Network: sandbox.Network{Allow: []string{"a.example"}}}, sandbox.KindInvalid, nil},
		{"network off is fine", service.CreateRequest{Network: sandbox.Network{}}, "", nil},
		{"max cost is kept", service.CreateRequest{MaxCostMicros: &maxCost}, "", func(s sandbox.Spec) bool { return *s.MaxCostMicros == 1 }},
		{"default disk", service.CreateRequest{}, "", func(s sandbox.Spec) bool { return s.DiskMiB == 10240 }},
		{"disk_gib 2", service.CreateRequest{DiskGiB: gib(2)}, "", func(s sandbox.Spec) bool { return s.DiskMiB == 2048 }},
		{"disk_gib at the limit", service.CreateRequest{DiskGiB: gib(100)}, "", func(s sandbox.Spec) bool { return s.DiskMiB == 100<<10 }},
		{"disk_gib 0", service.CreateRequest{DiskGiB: gib(0)}, sandbox.KindInvalid, nil},
		{"negative disk_gib", service.CreateRequest{DiskGiB: gib(-1)}, sandbox.KindInvalid, nil},
		{"disk_gib above the limit", service.CreateRequest{DiskGiB: gib(101)}, sandbox.KindInvalid, nil},
		{"isolation gvisor", service.CreateRequest{Isolation: "gvisor"}, "", func(s sandbox.Spec) bool { return s.Isolation == "gvisor" }},
		{"isolation the server does not run", service.CreateRequest{Isolation: "microvm"}, sandbox.KindNotSupported, nil},
		{"unknown isolation", service.CreateRequest{Isolation: "kvm"}, sandbox.KindInvalid, nil},
		{"isolation in capitals", service.CreateRequest{Isolation: "GVISOR"}, sandbox.KindInvalid, nil},
		{"negative max cost", service.CreateRequest{MaxCostMicros: &negCost}, sandbox.KindInvalid, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := m.specFor(t.Context(), "acct", tt.req)
			if tt.wantKind == "" {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				if tt.check != nil && !tt.check(spec) {
					t.Fatalf("got spec %+v", spec)
				}
				return
			}
			if got := sandbox.KindOf(err); got != tt.wantKind {
				t.Fatalf("got %v (kind %s), want kind %s", err, got, tt.wantKind)
			}
		})
	}
}

func TestStateErrors(t *testing.T) {
	tests := []struct {
		rec  sandbox.Record
		want sandbox.Kind
	}{
		{sandbox.Record{State: sandbox.StateEnded, EndReason: sandbox.EndLeaseEnded}, sandbox.KindLeaseEnded},
		{sandbox.Record{State: sandbox.StateEnded, EndReason: sandbox.EndStopped}, sandbox.KindConflict},
		{sandbox.Record{State: sandbox.StatePaused}, sandbox.KindConflict},
	}
	for _, tt := range tests {
		if got := sandbox.KindOf(stateError(&tt.rec, "exec")); got != tt.want {
			t.Errorf("%s/%s: got %s, want %s", tt.rec.State, tt.rec.EndReason, got, tt.want)
		}
	}
}
