package server

import (
	"strings"
	"testing"
	"time"
)

func TestHostEgressConns(t *testing.T) {
	for _, tc := range []struct {
		nofile    uint64
		maxConns  int
		listeners int
		want      int
	}{
		{65536, 0, 1, (65536 - 4096 - 4096) / 2},    // the API's default 4,096
		{65536, 0, 2, (65536 - 2*4096 - 4096) / 2},  // and E2B's as many
		{1 << 20, 0, 1, (1<<20 - 4096 - 4096) / 2},  // systemd's usual hard limit
		{20000, 1000, 1, (20000 - 1000 - 4096) / 2}, // a smaller --max-conns
		{20000, 1000, 2, (20000 - 2000 - 4096) / 2}, // for both listeners
		{4096, 0, 1, (4096 - 2048 - 1024) / 2},      // the API gets half, the rest a quarter
		{4096, 0, 2, (4096 - 2048 - 1024) / 2},      // the API and E2B share that half
		{1024, 0, 1, (1024 - 512 - 256) / 2},        // Go's soft limit before it raises it
		{3, 0, 1, 1},                                // nothing left: one, never none
	} {
		got := hostEgressConns(tc.nofile, tc.maxConns, tc.listeners)
		if got != tc.want {
			t.Errorf("hostEgressConns(%d, %d, %d): got %d, want %d", tc.nofile, tc.maxConns, tc.listeners, got, tc.want)
		}
		// Two descriptors a connection, the listeners' (as listenerConns
		// bounds them) and the reserve fit.
		clients := uint64(tc.listeners * listenerConns(tc.maxConns, tc.listeners, tc.nofile))
		if tc.nofile > 16 && uint64(2*got)+clients+min(otherReserve, tc.nofile/4) > tc.nofile {
			t.Errorf("hostEgressConns(%d, %d, %d) = %d: with the listeners' connections, more than the limit", tc.nofile, tc.maxConns, tc.listeners, got)
		}
	}
}

func TestListenerConns(t *testing.T) {
	for _, tc := range []struct {
		maxConns, listeners int
		nofile              uint64
		want                int
	}{
		{0, 1, 1 << 20, 4096}, // the default
		{0, 2, 1 << 20, 4096}, // for each of API and E2B
		{0, 1, 4096, 2048},    // half the descriptors
		{0, 2, 4096, 1024},    // shared by both
		{3000, 2, 8192, 2048}, // --max-conns past the share
		{1000, 2, 8192, 1000}, // within it
		{100, 2, 0, 100},      // the limit unknown
		{100, 2, 2, 1},        // at least one each
	} {
		got := listenerConns(tc.maxConns, tc.listeners, tc.nofile)
		if got != tc.want {
			t.Errorf("listenerConns(%d, %d, %d): got %d, want %d", tc.maxConns, tc.listeners, tc.nofile, got, tc.want)
		}
		if tc.nofile > 0 && uint64(got*tc.listeners) > max(tc.nofile/2, uint64(tc.listeners)) {
			t.Errorf("listenerConns(%d, %d, %d) = %d: the listeners together take more than half the limit", tc.maxConns, tc.listeners, tc.nofile, got)
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
