package billing

import (
	"testing"

	"github.com/withruntime/withruntime/internal/defaults"
)

// A trial hour is an hour of the default sandbox. The unit stays written
// here, so that billing imports nothing of this module and a change of the
// default size does not silently change what trial hours already handed
// out are worth; this test makes such a change a decision about both.
func TestTrialUnitIsTheDefaultSize(t *testing.T) {
	if TrialMemoryMiB != defaults.MemoryMiB || TrialCPUs != defaults.VCPUs {
		t.Errorf("the trial unit is %d vCPUs and %d MiB, the default size %d vCPUs and %d MiB", TrialCPUs, TrialMemoryMiB, defaults.VCPUs, defaults.MemoryMiB)
	}
}
