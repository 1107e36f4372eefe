package main

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/server"
)

// node's flags fill the node's configuration.
func TestNodeFlags(t *testing.T) {
	var got server.NodeConfig
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	run := nodeWith(fs, func(_ context.Context, cfg server.NodeConfig) error { got = cfg; return nil })
	args := []string{
		"--store", "postgres://u:p@db:5432/wr", "--data-dir", "/d", "--listen", "0.0.0.0:7900", "--advertise", "10.1.2.3:7900",
		"--shared-checkpoints", "/mnt/cp", "--node-lease", "30s", "--overcommit", "2", "--no-egress", "--pool", "none",
		"--egress-permit", "198.18.0.0/15",
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if code := run(fs.Args()); code != 0 {
		t.Fatalf("got exit %d, want 0", code)
	}
	switch {
	case got.Store != "postgres://u:p@db:5432/wr" || got.DataDir != "/d" || got.Listen != "0.0.0.0:7900" || got.Advertise != "10.1.2.3:7900":
		t.Errorf("got store %q data %q listen %q advertise %q, want the flags'", got.Store, got.DataDir, got.Listen, got.Advertise)
	case got.SharedCheckpoints != "/mnt/cp" || got.LeaseTTL != 30*time.Second:
		t.Errorf("got shared %q lease %v, want /mnt/cp and 30s", got.SharedCheckpoints, got.LeaseTTL)
	case got.Manager.Overcommit != 2 || !got.NoEgress || len(got.Manager.Pools) != 0 || len(got.EgressPermit) != 1:
		t.Errorf("got overcommit %v no-egress %v pools %v permit %v, want the flags'", got.Manager.Overcommit, got.NoEgress, got.Manager.Pools, got.EgressPermit)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// A node needs its store, and an address to be reached at.
func TestNodeConfigRefuses(t *testing.T) {
	base := server.NodeConfig{Store: "postgres://db/wr", Config: server.Config{DataDir: "/d", CacheDir: "/c", Listen: "127.0.0.1:7879"}}
	tests := []struct {
		name string
		edit func(*server.NodeConfig)
	}{
		{"no store", func(c *server.NodeConfig) { c.Store = "" }},
		{"no host to advertise", func(c *server.NodeConfig) { c.Listen = ":7879" }},
		{"unspecified host", func(c *server.NodeConfig) { c.Listen = "0.0.0.0:7879" }},
		{"relative shared dir", func(c *server.NodeConfig) { c.SharedCheckpoints = "cp" }},
		{"short lease", func(c *server.NodeConfig) { c.LeaseTTL = time.Millisecond }},
		{"no data dir", func(c *server.NodeConfig) { c.DataDir = "" }},
	}
	if err := base.Validate(); err != nil {
		t.Fatalf("base: %v", err)
	}
	for _, tt := range tests {
		c := base
		tt.edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: got no error", tt.name)
		}
	}
}
