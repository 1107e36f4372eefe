package manager

import (
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/sandbox/backendtest"
)

// TestFakeBackendSuite runs the backend suite against the manager's fake,
// the same suite gVisor and the microVM backend pass: where the lifecycle
// tests lean on the fake behaving like a real backend, this is the check.
func TestFakeBackendSuite(t *testing.T) {
	backendtest.Run(t, "fake", func(t *testing.T) sandbox.Backend { return newFakeBackend() }, backendtest.Options{
		Spec: sandbox.Spec{VCPUs: 1, MemoryMiB: 512, DiskMiB: 1024, PidsLimit: 256},
		Slow: true,
		Wait: 5 * time.Second,
	})
}
