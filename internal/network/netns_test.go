package network

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNamespaceLifecycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make network namespaces")
	}
	path := filepath.Join(t.TempDir(), "ns")
	if err := NewNamespace(path); err != nil {
		t.Fatalf("NewNamespace: %v", err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if !strings.Contains(string(mounts), path) {
		t.Fatalf("namespace %s is not pinned by a mount", path)
	}
	host, _ := os.Readlink("/proc/self/ns/net")
	if err := RemoveNamespace(path); err != nil {
		t.Fatalf("RemoveNamespace: %v", err)
	}
	if after, _ := os.Readlink("/proc/self/ns/net"); after != host {
		t.Fatalf("process namespace changed: got %s, want %s", after, host)
	}
	mounts, _ = os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), path) {
		t.Fatalf("namespace %s still mounted after removal", path)
	}
	if err := RemoveNamespace(path); err != nil {
		t.Fatalf("second RemoveNamespace: got %v, want nil", err)
	}
}
