package egress

import "testing"

// TestAccountShareOfHost: one account's bound on proxied connections
// leaves a quarter of the host's to the others, however it is set.
func TestAccountShareOfHost(t *testing.T) {
	tests := []struct {
		name                string
		perSandbox, account int
		host                int
		want                int
	}{
		{"the default under a large host", 0, 0, 100_000, DefaultAccountConnsFactor * DefaultMaxConns},
		{"the default over a small host", 0, 0, 1024, 768},
		{"set above the host", 10, 5000, 2000, 1500},
		{"set below the host's share", 10, 20, 2000, 20},
		{"no host bound", 10, 5000, 0, 5000},
		{"a host of one", 1, 4, 1, 1},
	}
	for _, tt := range tests {
		c := Config{MaxConns: tt.perSandbox, MaxConnsAccount: tt.account, MaxConnsHost: tt.host}
		c.setDefaults()
		if c.MaxConnsAccount != tt.want {
			t.Errorf("%s: got an account's bound %d, want %d", tt.name, c.MaxConnsAccount, tt.want)
		}
	}
}
