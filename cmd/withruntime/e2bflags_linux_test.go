package main

import "testing"

func TestServeE2BFlags(t *testing.T) {
	cfg, code, stderr := serveConfig(t, "--e2b-listen", "127.0.0.1:3000", "--e2b-domain", "sbx.example.org")
	if code != 0 || cfg == nil {
		t.Fatalf("got exit %d %q, want 0", code, stderr)
	}
	if cfg.E2BListen != "127.0.0.1:3000" || cfg.E2BDomain != "sbx.example.org" {
		t.Errorf("got E2BListen %q E2BDomain %q, want 127.0.0.1:3000 and sbx.example.org", cfg.E2BListen, cfg.E2BDomain)
	}
	if cfg.E2BNoInternet {
		t.Errorf("got E2BNoInternet without --e2b-internet=false, want E2B's default (internet on)")
	}
	cfg, code, _ = serveConfig(t)
	if code != 0 || cfg == nil || cfg.E2BListen != "" {
		t.Errorf("no flag: got exit %d, config %+v, want 0 and no E2B listener", code, cfg)
	}
	cfg, code, stderr = serveConfig(t, "--e2b-listen", "127.0.0.1:3000", "--e2b-internet=false")
	if code != 0 || cfg == nil || !cfg.E2BNoInternet {
		t.Errorf("--e2b-internet=false: got exit %d %q, config %+v, want E2BNoInternet", code, stderr, cfg)
	}
}
