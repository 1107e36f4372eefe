package main

import (
	"strings"
	"testing"
)

func TestServeIsolationFlags(t *testing.T) {
	tests := []struct {
		name               string
		args               []string
		wantIso, wantAccel string
		wantCode           int
		wantErr            string // in stderr, when the exit is 2
	}{
		{"defaults", nil, "auto", "kvm", 0, ""},
		{"microvm under tcg", []string{"--isolation", "microvm", "--microvm-accel", "tcg"}, "microvm", "tcg", 0, ""},
		{"gvisor", []string{"--isolation", "gvisor"}, "gvisor", "kvm", 0, ""},
		{"unknown isolation", []string{"--isolation", "firecracker"}, "", "", 2, "want auto, gvisor, microvm"},
		{"unknown accel", []string{"--microvm-accel", "hvf"}, "", "", 2, "want kvm, tcg"},
	}
	for _, tt := range tests {
		cfg, code, stderr := serveConfig(t, tt.args...)
		if code != tt.wantCode {
			t.Errorf("%s: exit got %d, want %d (stderr %q)", tt.name, code, tt.wantCode, stderr)
			continue
		}
		if code != 0 {
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("%s: stderr %q lacks %q", tt.name, stderr, tt.wantErr)
			}
			continue
		}
		if accel := cfg.BackendOptions["microvm-accel"]; cfg.Isolation != tt.wantIso || accel != tt.wantAccel {
			t.Errorf("%s: got isolation %q accel %q, want %q %q", tt.name, cfg.Isolation, accel, tt.wantIso, tt.wantAccel)
		}
	}
}
