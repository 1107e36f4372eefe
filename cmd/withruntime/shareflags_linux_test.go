package main

import "testing"

// TestServeHostShareFlags: --trial-host-share and --account-host-share
// reach the manager; by default trials hold half of the host and no
// account is bound.
func TestServeHostShareFlags(t *testing.T) {
	for _, c := range []struct {
		args                []string
		wantTrial, wantAcct float64
	}{
		{nil, 0.5, 1},
		{[]string{"--trial-host-share", "0.25", "--account-host-share", "0.5"}, 0.25, 0.5},
	} {
		cfg, code, stderr := serveConfig(t, c.args...)
		if code != 0 || cfg == nil {
			t.Fatalf("%q: got exit %d %q, want 0", c.args, code, stderr)
		}
		if got := cfg.Manager; got.TrialHostShare != c.wantTrial || got.AccountHostShare != c.wantAcct {
			t.Errorf("%q: got trial share %g, account share %g; want %g and %g", c.args, got.TrialHostShare, got.AccountHostShare, c.wantTrial, c.wantAcct)
		}
	}
}
