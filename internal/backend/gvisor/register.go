package gvisor

import "github.com/withruntime/withruntime/internal/sandbox"

// gVisor runs wherever the server does (runsc needs no hardware support),
// so it is the backend every server runs and what auto falls back to.
func init() {
	sandbox.Register(sandbox.Registration{
		Name: Name,
		New: func(cfg sandbox.BackendConfig) (sandbox.Backend, error) {
			return New(Config{DataDir: cfg.DataDir, CacheDir: cfg.CacheDir, Egress: cfg.Egress, SharedCheckpoints: cfg.SharedCheckpoints, Layers: cfg.Layers})
		},
		Required: true,
	})
}
