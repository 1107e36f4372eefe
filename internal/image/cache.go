package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

const completeMark = ".withruntime-complete"

// Dir is where the recipe's image lives inside cacheDir.
func Dir(cacheDir string, r Recipe) string {
	return filepath.Join(cacheDir, "images", r.Key())
}

// Rootfs returns the root directory of a built image by name. It fails
// with a clear message when the image has not been built.
func Rootfs(cacheDir, name string) (string, error) {
	if name != DefaultName {
		return "", fmt.Errorf("unknown image %q", name)
	}
	root := filepath.Join(Dir(cacheDir, Default), "rootfs")
	if _, err := os.Stat(filepath.Join(Dir(cacheDir, Default), completeMark)); err != nil {
		return "", fmt.Errorf("image %q is not built in %s: run `withruntime setup`", name, cacheDir)
	}
	return root, nil
}

// Build builds the recipe into the cache unless it is there already. It
// reports progress on w. The result is the root directory.
func Build(ctx context.Context, cacheDir string, r Recipe, w io.Writer) (string, error) {
	dir := Dir(cacheDir, r)
	root := filepath.Join(dir, "rootfs")
	if _, err := os.Stat(filepath.Join(dir, completeMark)); err == nil {
		fmt.Fprintf(w, "image %s: cached at %s\n", r.Key(), root)
		return root, nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", errors.New("mmdebstrap is not installed (apt-get install mmdebstrap)")
	}
	tmp := dir + ".partial"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Join(tmp, "rootfs"), 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	tar := filepath.Join(tmp, "rootfs.tar")
	fmt.Fprintf(w, "image %s: building Debian %s with mmdebstrap (a few minutes; about 1.2 GB)\n", r.Key(), r.Suite)
	cmd := exec.CommandContext(ctx, "mmdebstrap", r.Args(tar)...)
	cmd.Stdout, cmd.Stderr = w, w
	stop := heartbeat(w, r.Key(), 30*time.Second)
	err := cmd.Run()
	stop()
	if err != nil {
		return "", fmt.Errorf("mmdebstrap: %w", err)
	}
	fmt.Fprintf(w, "image %s: unpacking\n", r.Key())
	untar := exec.CommandContext(ctx, "tar", "--numeric-owner", "-xpf", tar, "-C", filepath.Join(tmp, "rootfs"))
	untar.Stderr = w
	if err := untar.Run(); err != nil {
		return "", fmt.Errorf("unpacking image: %w", err)
	}
	os.Remove(tar)
	if err := os.WriteFile(filepath.Join(tmp, completeMark), []byte(r.Key()+"\n"), 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("publishing image: %w", err)
	}
	fmt.Fprintf(w, "image %s: ready at %s\n", r.Key(), root)
	return root, nil
}

// heartbeat says every interval that the build still runs: mmdebstrap is
// silent for minutes while it installs packages inside the chroot.
func heartbeat(w io.Writer, key string, every time.Duration) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "image %s: still building (%s)\n", key, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); <-finished }
}
