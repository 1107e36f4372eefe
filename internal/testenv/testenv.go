// Package testenv holds helpers for tests that need the real platform: root,
// runsc and the built image in the shared cache, and the project's binaries
// built once per test process. Outside CI a missing requirement skips the
// test with the reason; under CI (CI=true) it fails it, because CI installs
// everything and nothing real may be skipped there.
//
// Only tests import it.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/internal/image"
)

// CacheDir is the shared cache the tests use: WITHRUNTIME_CACHE_DIR or the
// default.
func CacheDir() string {
	if d := os.Getenv("WITHRUNTIME_CACHE_DIR"); d != "" {
		return d
	}
	return "/var/cache/withruntime"
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must have this: %s", why)
	}
	t.Skip(why)
}

// RequiresRoot skips (fails under CI) unless the test runs as root.
func RequiresRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "needs root")
	}
}

// RequiresGvisor needs root, runsc and the default image in the cache, and
// puts the agent of this checkout into the cache.
func RequiresGvisor(t testing.TB) {
	t.Helper()
	RequiresRoot(t)
	if _, err := os.Stat(filepath.Join(CacheDir(), "bin", "runsc")); err != nil {
		missing(t, "runsc is not in the cache: run `withruntime setup`")
	}
	if _, err := image.Rootfs(CacheDir(), image.DefaultName); err != nil {
		missing(t, err.Error())
	}
	agentOnce.Do(func() {
		agentErr = build(filepath.Join(CacheDir(), "bin", "sandbox-agent"), "./cmd/sandbox-agent")
	})
	if agentErr != nil {
		t.Fatalf("building the agent: %v", agentErr)
	}
}

var (
	agentOnce sync.Once
	agentErr  error
	cliOnce   sync.Once
	cliPath   string
	cliErr    error
)

// Root is the project's checkout.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// build builds a static binary of the project into out.
func build(out, pkg string) error {
	tmp := out + ".tmp"
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return &buildError{pkg, string(b), err}
	}
	return os.Rename(tmp, out)
}

type buildError struct {
	pkg, out string
	err      error
}

func (e *buildError) Error() string { return "go build " + e.pkg + ": " + e.err.Error() + "\n" + e.out }

// CLI returns the path of the withruntime binary built from this checkout.
func CLI(t testing.TB) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "withruntime-bin-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "withruntime")
		cliErr = build(cliPath, "./cmd/withruntime")
	})
	if cliErr != nil {
		t.Fatalf("building the CLI: %v", cliErr)
	}
	return cliPath
}

var (
	initOnce sync.Once
	initErr  error
)

// RequiresMicroVM skips (fails under CI) unless setup made what microVMs
// boot: QEMU, the guest kernel and the image's disk. It builds the agent
// and the guest init from this checkout into the cache, as the gVisor
// tests build the agent.
func RequiresMicroVM(t testing.TB) {
	t.Helper()
	RequiresGvisor(t)
	for _, p := range []string{"/usr/bin/qemu-system-x86_64", filepath.Join(CacheDir(), "microvm", "kernel", "current"), filepath.Join(image.Dir(CacheDir(), image.Default), "rootfs.ext4")} {
		if _, err := os.Stat(p); err != nil {
			missing(t, p+" is missing: run `withruntime setup`")
		}
	}
	initOnce.Do(func() {
		initErr = build(filepath.Join(CacheDir(), "bin", "microvm-init"), "./cmd/microvm-init")
	})
	if initErr != nil {
		t.Fatalf("building the guest init: %v", initErr)
	}
}
