package gvisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	root, release, err := layer.Root(p.rootDir(), lowers)
	if err != nil {
		return "", err
	}
	missing := b.missingMountPoints(root, p)
	if len(missing) == 0 {
		return root, nil
	}
	// runsc mounts onto what the root has, and a template's root is
	// read-only: what an image lacks of the sandbox's mount points comes
	// in a small layer of their own on top, made of those alone.
	if err := release(); err != nil {
		return "", err
	}
	top, err := mountPointLayer(p, missing)
	if err != nil {
		return "", err
	}
	root, _, err = layer.Root(p.rootDir(), append([]string{top}, lowers...))
	return root, err
}

// mountPoint is where the sandbox's spec mounts something, and whether it
// is a file (a bind of one) or a directory.
type mountPoint struct {
	path string
	file bool
}

// missingMountPoints lists the mount points of a sandbox's spec that root
// lacks, looked up inside root (os.Root: never out of it).
func (b *Backend) missingMountPoints(root string, p paths) []mountPoint {
	want := []mountPoint{{"/proc", false}, {"/dev", false}, {"/sys", false}, {"/tmp", false}, {agentMountDir, false}, {sockMountDir, false}}
	for _, m := range b.egressMounts(p) {
		want = append(want, mountPoint{m.Destination, true})
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return want
	}
	defer r.Close()
	var missing []mountPoint
	for _, m := range want {
		if _, err := r.Lstat(strings.TrimPrefix(m.path, "/")); err != nil {
			missing = append(missing, m)
		}
	}
	return missing
}

// mountPointLayer makes the layer of the missing mount points in the
// sandbox's run dir: empty files and directories, owned by root.
func mountPointLayer(p paths, missing []mountPoint) (string, error) {
	dir := filepath.Join(p.run, "mountpoints")
	os.RemoveAll(dir)
	for _, m := range missing {
		target := filepath.Join(dir, m.path)
		parent := target
		if m.file {
			parent = filepath.Dir(target)
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", err
		}
		if m.file {
			if err := os.WriteFile(target, nil, 0o644); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// unmountRoot removes the stacked root of a sandbox, if it has one.
func unmountRoot(p paths) {
	for unix.Unmount(p.rootDir(), unix.MNT_DETACH) == nil {
	}
}
