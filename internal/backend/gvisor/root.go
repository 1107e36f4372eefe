package gvisor

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// rootDir is where a template's layers are stacked for a sandbox: in its
// run dir, which only root may reach.
func (p paths) rootDir() string { return filepath.Join(p.run, "rootfs") }

// rootfs returns the root directory of a sandbox of spec: the built-in
// image's, or its template's layers stacked read-only over their base at
// p.rootDir() (internal/layer). The sandbox writes over either in its own
// overlay (--overlay2), never into them.
func (b *Backend) rootfs(p paths, spec sandbox.Spec) (string, error) {
	base := ""
	if spec.Root == nil || spec.Root.Base != "" {
		name := image.DefaultName
		if spec.Root != nil {
			name = spec.Root.Base
		}
		dir, err := image.Rootfs(b.cfg.CacheDir, name)
		if err != nil {
			return "", err
		}
		base = dir
	}
	if spec.Root == nil || len(spec.Root.Layers) == 0 {
		if base == "" {
			return "", errors.New("a template of no layers and no base")
		}
		return base, nil
	}
	if b.cfg.Layers == nil {
		return "", sandbox.Errorf(sandbox.KindNotSupported, "this server keeps no template layers")
	}
	var lowers []string
	for _, d := range slices.Backward(spec.Root.Layers) {
		dir, err := b.cfg.Layers.Dir(d)
		if err != nil {
			return "", fmt.Errorf("layer %s of template %s: %w", d, spec.Root.Template, err)
		}
		lowers = append(lowers, dir)
	}
	if base != "" {
		lowers = append(lowers, base)
	}
	// A mount left by a pause or a crash goes first: one root per sandbox.
	unmountRoot(p)
	root, _, err := layer.Root(p.rootDir(), lowers)
	return root, err
}

// unmountRoot removes the stacked root of a sandbox, if it has one.
func unmountRoot(p paths) {
	for unix.Unmount(p.rootDir(), unix.MNT_DETACH) == nil {
	}
}
