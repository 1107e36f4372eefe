package microvm

import (
	"context"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestRawBoot boots the guest's kernel and init with the probe's argument
// under TCG: init answers with guest.ProbeOK, as the KVM probe needs it to
// on a host where KVM works; a guest that cannot finish in time is an
// error, not a hang.
func TestRawBoot(t *testing.T) {
	testenv.RequiresMicroVM(t)
	d, err := RawBoot(t.Context(), testenv.CacheDir(), "tcg")
	if err != nil || d <= 0 {
		t.Fatalf("raw boot under TCG: got %v, %v; want init's answer", d, err)
	}
	t.Logf("raw boot to init's answer: %v", d)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := RawBoot(ctx, testenv.CacheDir(), "tcg"); err == nil {
		t.Fatal("a raw boot given 200 ms: got an answer, want the time-out")
	}
}
