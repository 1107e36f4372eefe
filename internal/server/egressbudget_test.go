package server

import (
	"strings"
	"testing"
	"time"
)

func TestHostEgressConns(t *testing.T) {
	for _, tc := range []struct {
		nofile   uint64
		apiConns int
		want     int
	}{
		{65536, 0, (65536 - 4096 - 4096) / 2},    // the API's default 4,096
		{1 << 20, 0, (1<<20 - 4096 - 4096) / 2},  // systemd's usual hard limit
		{20000, 1000, (20000 - 1000 - 4096) / 2}, // a smaller --max-conns
		{4096, 0, (4096 - 2048 - 1024) / 2},      // the API gets half, the rest a quarter
		{1024, 0, (1024 - 512 - 256) / 2},        // Go's soft limit before it raises it
		{3, 0, 1},                                // nothing left: one, never none
	} {
		got := hostEgressConns(tc.nofile, tc.apiConns)
		if got != tc.want {
			t.Errorf("hostEgressConns(%d, %d): got %d, want %d", tc.nofile, tc.apiConns, got, tc.want)
		}
		// Two descriptors a connection, the API's and the reserve fit.
		if tc.nofile > 16 && uint64(2*got)+min(uint64(max(tc.apiConns, 4096)), tc.nofile/2) > tc.nofile {
			t.Errorf("hostEgressConns(%d, %d) = %d: with the API's connections, more than the limit", tc.nofile, tc.apiConns, got)
		}
	}
}

func TestValidateEgressLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // "" valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"idle 1s", func(c *Config) { c.EgressIdleTimeout = time.Second }, ""},
		{"idle 1ns", func(c *Config) { c.EgressIdleTimeout = time.Nanosecond }, "--egress-idle-timeout 1ns: must be at least 1s"},
		{"idle 999ms", func(c *Config) { c.EgressIdleTimeout = 999 * time.Millisecond }, "must be at least 1s"},
		{"idle negative", func(c *Config) { c.EgressIdleTimeout = -time.Second }, "--egress-idle-timeout must not be negative"},
		{"account negative", func(c *Config) { c.EgressMaxConnsAccount = -1 }, "--egress-max-conns-account must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{DataDir: t.TempDir()}
			c.setDefaults()
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
