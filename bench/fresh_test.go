package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// The check passes fresh sandboxes and fails a reused one: a second probe
// of the same sandbox sees its markers and its boot id again, as a pool
// handing out a used sandbox would show.
func TestFreshnessFailsReuse(t *testing.T) {
	srv := testenv.StartServer(t)
	c, err := client.New(client.WithBaseURL(srv.URL), client.WithAPIKey(srv.Key))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := newFreshness()
	f.out = io.Discard
	var ids []string
	for i := 0; i < 2; i++ {
		sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 512, TimeoutSeconds: 120})
		if err != nil {
			t.Fatal(err)
		}
		defer c.StopSandbox(ctx, sb.ID)
		ids = append(ids, sb.ID)
		f.check(ctx, c, sb.ID)
	}
	if len(f.fails) != 0 || len(f.boots) != 2 {
		t.Fatalf("two fresh sandboxes: got failures %q and %d boot ids, want none and 2", f.fails, len(f.boots))
	}
	f.check(ctx, c, ids[0])
	all := strings.Join(f.fails, "\n")
	for _, want := range []string{"/tmp/bench-marker " + ids[0], "/workspace/bench-marker " + ids[0], "seen before in sandbox " + ids[0]} {
		if !strings.Contains(all, want) {
			t.Errorf("reused sandbox: got failures %q, want one with %q", f.fails, want)
		}
	}
}
