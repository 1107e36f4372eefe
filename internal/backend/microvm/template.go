package microvm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// diskLocks serializes the making of each disk.
var diskLocks sync.Map // key -> *sync.Mutex

// baseFor is the read-only base disk of a sandbox of spec: the default
// image's, or its template's (made now if it is not yet).
func (b *Backend) baseFor(ctx context.Context, spec sandbox.Spec) (string, error) {
	if spec.Root == nil || (spec.Root.Base != "" && len(spec.Root.Layers) == 0) {
		return b.base, nil
	}
	if b.cfg.Layers == nil {
		return "", sandbox.Errorf(sandbox.KindNotSupported, "this server keeps no template layers")
	}
	key := layer.StackKey(spec.Root.Base, spec.Root.Layers)
	// One disk per stack of layers (layer.StackKey), made on a
	// template's first microVM and shared read-only by every later one.
	dir := b.cfg.Layers.StacksDir()
	disk := filepath.Join(dir, key+".ext4")
	mu, _ := diskLocks.LoadOrStore(key, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if exists(disk) {
		return disk, nil
	}
	var lowers []string
	for _, d := range slices.Backward(spec.Root.Layers) {
		dir, err := b.cfg.Layers.Dir(d)
		if err != nil {
			return "", fmt.Errorf("layer %s of template %s: %w", d, spec.Root.Template, err)
		}
		lowers = append(lowers, dir)
	}
	if spec.Root.Base != "" {
		lowers = append(lowers, filepath.Join(image.Dir(b.cfg.CacheDir, image.Default), "rootfs"))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(dir, "make-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	root, release, err := layer.Root(filepath.Join(work, "root"), lowers)
	if err != nil {
		return "", err
	}
	defer release()
	if err := makeDisk(ctx, root, filepath.Join(work, "disk.ext4")); err != nil {
		return "", err
	}
	return disk, os.Rename(filepath.Join(work, "disk.ext4"), disk)
}

// makeDisk writes the tree at root as a read-only ext4 disk at path,
// with room for its files and a quarter more.
func makeDisk(ctx context.Context, root, path string) error {
	du, err := exec.CommandContext(ctx, "du", "-sm", "--apparent-size", root).Output()
	if err != nil {
		return fmt.Errorf("du %s: %w", root, err)
	}
	var mib int
	fmt.Sscan(string(du), &mib)
	size := mib + mib/4 + 256
	mk := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-L", "withruntime", "-m", "0", "-d", root, "-E", "root_owner=0:0", path, fmt.Sprintf("%dM", size))
	if out, err := mk.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, out)
	}
	return os.Chmod(path, 0o444)
}
