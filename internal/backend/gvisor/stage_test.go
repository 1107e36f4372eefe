package gvisor

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestStageAgentConcurrently: servers starting together on one cache all
// stage the agent, none failing on another's temporary file.
func TestStageAgentConcurrently(t *testing.T) {
	cache := t.TempDir()
	agent := filepath.Join(t.TempDir(), "sandbox-agent")
	want := bytes.Repeat([]byte("agent binary "), 1<<16)
	if err := os.WriteFile(agent, want, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Agent: agent, CacheDir: cache}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	dirs := make(chan string, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir, err := stageAgent(cfg)
			errs <- err
			dirs <- dir
		}()
	}
	wg.Wait()
	close(errs)
	close(dirs)
	for err := range errs {
		if err != nil {
			t.Fatalf("stageAgent: %v", err)
		}
	}
	dir := <-dirs
	got, err := os.ReadFile(filepath.Join(dir, "sandbox-agent"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("staged agent: %d bytes, %v; want the %d bytes of the agent", len(got), err, len(want))
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
