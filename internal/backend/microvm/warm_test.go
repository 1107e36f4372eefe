package microvm

import (
	"context"
	"testing"

	"github.com/withruntime/withruntime/internal/hostcgroup"
)

// TestWarmStartAndClaim: a pool member's QEMU waits at the lowest CPU
// priority and answers; Claim gives it the default one, and a claim of a
// destroyed sandbox fails.
func TestWarmStartAndClaim(t *testing.T) {
	b := newTestBackend(t)
	ctx := t.Context()
	const id = "sbx_vmwarm01"
	inst, err := b.StartWarm(ctx, id, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(context.Background(), id)
	priority := func() (got, warm, normal string) {
		t.Helper()
		got, warm, normal, err := hostcgroup.CPUPriority(b.cg, id)
		if err != nil {
			t.Fatal(err)
		}
		return got, warm, normal
	}
	if got, warm, _ := priority(); got != warm {
		t.Fatalf("warm: got CPU priority %s, want %s", got, warm)
	}
	if got := agentSh(t, agentClient(inst), "echo pooled"); got != "pooled" {
		t.Fatalf("a warm member's agent: got %q", got)
	}
	if err := b.Claim(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got, _, normal := priority(); got != normal {
		t.Fatalf("claimed: got CPU priority %s, want %s", got, normal)
	}
	if err := b.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(ctx, id); err == nil {
		t.Error("claiming a destroyed sandbox: got no error")
	}
}
