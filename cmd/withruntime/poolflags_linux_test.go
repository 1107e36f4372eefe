package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/cli"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/server"
)

// serveConfig runs "withruntime serve ARGS" through the real command tree
// with a stand-in for the server, returning the configuration serve would
// start it with (nil when it did not get that far) and the exit code.
func serveConfig(t *testing.T, args ...string) (*server.Config, int, string) {
	t.Helper()
	var got *server.Config
	app := &cli.App{Hooks: cli.Hooks{Serve: func(fs *pflag.FlagSet) func([]string) int {
		return serveWith(fs, func(_ context.Context, cfg server.Config) error {
			got = &cfg
			return nil
		})
	}}}
	var stdout, stderr bytes.Buffer
	code := app.Main(append([]string{"serve", "--data-dir", t.TempDir()}, args...), strings.NewReader(""), &stdout, &stderr)
	return got, code, stderr.String()
}

func pool(vcpus, mib, n int) manager.Pool {
	return manager.Pool{VCPUs: vcpus, MemoryMiB: mib, Size: n}
}

func TestServePoolFlags(t *testing.T) {
	def := []manager.Pool{pool(2, 4096, server.DefaultPoolSize)}
	tests := []struct {
		name      string
		args      []string
		wantPools []manager.Pool // when the exit is 0
		wantCode  int
		wantErr   string // in stderr, when the exit is 2
	}{
		{"default", nil, def, 0, ""},
		{"one", []string{"--pool", "2x4096=8"}, []manager.Pool{pool(2, 4096, 8)}, 0, ""},
		{"two replace the default", []string{"--pool", "2x4096=8", "--pool", "1x1024=4"}, []manager.Pool{pool(2, 4096, 8), pool(1, 1024, 4)}, 0, ""},
		{"other size only", []string{"--pool=1x1024=4"}, []manager.Pool{pool(1, 1024, 4)}, 0, ""},
		{"size zero", []string{"--pool", "2x4096=0"}, []manager.Pool{pool(2, 4096, 0)}, 0, ""},
		{"none", []string{"--pool", "none"}, nil, 0, ""},
		{"none twice", []string{"--pool", "none", "--pool", "none"}, nil, 0, ""},
		{"none then size", []string{"--pool", "none", "--pool", "2x4096=8"}, nil, 2, `"2x4096=8" for "--pool" flag: 2x4096=8 cannot be combined with none`},
		{"size then none", []string{"--pool", "1x1024=4", "--pool", "none"}, nil, 2, `"none" for "--pool" flag: none cannot be combined with pool sizes`},
		{"duplicate size", []string{"--pool", "2x4096=8", "--pool", "2x4096=2"}, nil, 2, `pool "2x4096=2": size 2x4096 has a pool already (2x4096=8)`},
		{"no count", []string{"--pool", "2x4096"}, nil, 2, `pool "2x4096": want VCPUSxMEMORY_MIB=N`},
		{"no x", []string{"--pool", "4096=2"}, nil, 2, `pool "4096=2": want VCPUSxMEMORY_MIB=N`},
		{"zero vcpus", []string{"--pool", "0x4096=2"}, nil, 2, `pool "0x4096=2": "0" is not a whole number in range`},
		{"negative count", []string{"--pool", "2x4096=-1"}, nil, 2, `pool "2x4096=-1": "-1" is not a whole number in range`},
		{"words", []string{"--pool", "big=2"}, nil, 2, `pool "big=2"`},
		{"empty", []string{"--pool", ""}, nil, 2, `pool "": want VCPUSxMEMORY_MIB=N`},
		{"no value", []string{"--pool"}, nil, 2, `flag needs an argument: --pool`},
		{"a template's", []string{"--pool", "myteam/app:v1:2x4096=4", "--pool", "2x4096=8"}, []manager.Pool{{Template: "myteam/app:v1", VCPUs: 2, MemoryMiB: 4096, Size: 4}, pool(2, 4096, 8)}, 0, ""},
		{"a template's, tag latest", []string{"--pool", "app:1x1024=1"}, []manager.Pool{{Template: "app:latest", VCPUs: 1, MemoryMiB: 1024, Size: 1}}, 0, ""},
		{"a template's twice", []string{"--pool", "app:1x1024=1", "--pool", "app:latest:1x1024=2"}, nil, 2, `size 1x1024 has a pool already (app:latest:1x1024=1)`},
		{"a bad template name", []string{"--pool", "App:1x1024=1"}, nil, 2, `bad template name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, code, stderr := serveConfig(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("got exit %d (stderr %q), want %d", code, stderr, tt.wantCode)
			}
			if code != 0 {
				if cfg != nil {
					t.Errorf("got the server started with %v, want no start", cfg.Manager.Pools)
				}
				if !strings.Contains(stderr, tt.wantErr) || !strings.Contains(stderr, "usage: withruntime serve") {
					t.Errorf("got stderr %q, want %q and the usage line in it", stderr, tt.wantErr)
				}
				return
			}
			if !reflect.DeepEqual(cfg.Manager.Pools, tt.wantPools) {
				t.Errorf("got pools %v, want %v", cfg.Manager.Pools, tt.wantPools)
			}
		})
	}
}

func TestServePoolMaxAge(t *testing.T) {
	tests := []struct {
		args     []string
		want     time.Duration
		wantCode int
		wantErr  string
	}{
		{nil, 30 * time.Minute, 0, ""},
		{[]string{"--pool-max-age", "5m"}, 5 * time.Minute, 0, ""},
		{[]string{"--pool-max-age=90s", "--pool", "none"}, 90 * time.Second, 0, ""},
		{[]string{"--pool-max-age", "0"}, 0, 2, `"0": must be positive`},
		{[]string{"--pool-max-age", "-1m"}, 0, 2, `"-1m": must be positive`},
		{[]string{"--pool-max-age", "soon"}, 0, 2, `"soon" is not a duration`},
	}
	for _, tt := range tests {
		cfg, code, stderr := serveConfig(t, tt.args...)
		if code != tt.wantCode {
			t.Errorf("%v: got exit %d (stderr %q), want %d", tt.args, code, stderr, tt.wantCode)
			continue
		}
		if code != 0 {
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("%v: got stderr %q, want %q in it", tt.args, stderr, tt.wantErr)
			}
			continue
		}
		if cfg.Manager.PoolMaxAge != tt.want {
			t.Errorf("%v: got max age %v, want %v", tt.args, cfg.Manager.PoolMaxAge, tt.want)
		}
	}
}

// The rest of serve's configuration still reaches the server beside the
// pools, and the help names the flags.
func TestServePoolsBesideOtherFlags(t *testing.T) {
	cfg, code, stderr := serveConfig(t, "--listen", "127.0.0.1:9", "--pool", "1x512=3", "--overcommit", "2")
	if code != 0 {
		t.Fatalf("got exit %d (stderr %q), want 0", code, stderr)
	}
	if cfg.Listen != "127.0.0.1:9" || cfg.Manager.Overcommit != 2 || !reflect.DeepEqual(cfg.Manager.Pools, []manager.Pool{pool(1, 512, 3)}) {
		t.Errorf("got listen %q overcommit %v pools %v, want 127.0.0.1:9, 2, [1x512=3]", cfg.Listen, cfg.Manager.Overcommit, cfg.Manager.Pools)
	}
	var stdout, errb bytes.Buffer
	app().Main([]string{"serve", "--help"}, strings.NewReader(""), &stdout, &errb)
	for _, w := range []string{"--pool [TEMPLATE:]SIZE=N", "default 2x4096=2", "--pool-max-age DURATION", "(default 30m0s)"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("serve --help: got %q, want %q in it", stdout.String(), w)
		}
	}
}
