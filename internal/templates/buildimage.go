package templates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/withruntime/withruntime/internal/ociimage"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// A build FROM an OCI image (a registry reference, or an image archive in
// the build context) reads the image once it runs, not in the request
// that asks for it: a slow pull shows in the build's log, and fails the
// build rather than the request. The image's layers and the platform layer
// are imported into the layer store as template import does (the same
// bounds: Config.Limits and what the account's template quota has left),
// and are the build's base, with the image's defaults (Base "", as an
// imported template has). The bytes count in the template the build makes.
//
// The layers are named by their content (the layer store's digests are
// the layers' diff ids; the platform layer depends only on the image), so
// the base key (contentKey) names the image exactly: a rebuild from the
// same image is cached, a changed one is not, and an imported template of
// the same image is the same base. The import itself is remembered in the
// build cache under imageKey (the registry's digest of the reference, or
// the archive's sha256): a rebuild asks the registry for the reference's
// digest (a HEAD) and reads no layer again while that entry's layers are
// stored. A build with no_cache still takes it, as docker build --no-cache
// does not pull again: the digest names the same bytes.

// contentKey is the base key of a base of those layers and defaults.
func contentKey(base string, layers []string, d template.Defaults) string {
	data, _ := json.Marshal(d)
	return fmt.Sprintf("withruntime/build-base/v1 %q %q %s", base, strings.Join(layers, ","), data)
}

// imageKey is the build cache's key of an imported image whose source
// (the registry's digest of its manifest or index, or the sha256 of its
// archive) is digest.
func imageKey(kind, digest string) string {
	return "withruntime/build-image/v1 " + kind + " " + digest
}

// pending reports whether the base is an image that the build reads when
// it runs.
func (b *baseOf) pending() bool { return b.Image != "" || b.Archive != "" }

// importBase reads base's image for build b (of template ref), makes its
// layers build b's active ones, and fills base in: its layers, defaults,
// key and bytes. What it imported and does not use is left to Collect.
func (l *Library) importBase(ctx context.Context, b *buildRun, ref template.Ref, base *baseOf, dir string) error {
	timeout := l.cfg.StepTimeout
	if timeout == 0 {
		timeout = DefaultStepTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info := func(format string, a ...any) {
		b.log(template.BuildEvent{Type: template.LogInfo, Message: fmt.Sprintf(format, a...)})
	}
	var (
		key  string
		read func(context.Context, ociimage.ImportFunc) (*ociimage.Result, error)
	)
	switch {
	case base.Image != "":
		opts := ociimage.Options{CARoots: l.cfg.CARoots, AllowPrivateRegistry: l.cfg.PrivateRegistries}
		info("pulling %s", base.Image)
		pinned, digest, err := ociimage.Pin(ctx, base.Image, opts)
		if err != nil {
			return baseImageError(base.Name, err)
		}
		info("%s is %s", base.Image, digest)
		key = imageKey("registry", digest)
		read = func(ctx context.Context, imp ociimage.ImportFunc) (*ociimage.Result, error) {
			return ociimage.ReadRemote(ctx, pinned, opts, imp)
		}
	default:
		file, digest, err := contextImage(dir, base.Archive)
		if err != nil {
			return err
		}
		info("reading the image archive %s", base.Archive)
		if digest != "" {
			key = imageKey("archive", digest)
		}
		read = func(ctx context.Context, imp ociimage.ImportFunc) (*ociimage.Result, error) {
			return ociimage.ReadFile(ctx, file, ociimage.Options{CARoots: l.cfg.CARoots}, imp)
		}
	}
	if key != "" {
		if e, ok := l.cacheTake(b.account, key, b.info.ID); ok && e.Defaults != nil {
			base.fill(e.Layers, *e.Defaults, e.SizeBytes)
			info("the image's %d layers are stored already", len(e.Layers))
			return nil
		}
	}

	l.mu.Lock()
	li, err := l.newLayerImporter(ctx, b.account, ref)
	l.mu.Unlock()
	if err != nil {
		return baseImageError(base.Name, err)
	}
	// Each layer is imported holding l.mu, and made the build's active one
	// before it is let go: Collect never sees it unnamed. A pull does not
	// hold it between layers.
	imp := func(ctx context.Context, r io.Reader) (string, error) {
		n := len(li.imported) + 1
		info("layer %d: reading", n)
		l.mu.Lock()
		defer l.mu.Unlock()
		before := li.total
		d, err := li.importLayer(ctx, r)
		if err != nil {
			return "", err
		}
		l.setActive(b.info.ID, li.imported)
		info("layer %d: %s, %d bytes", n, d, li.total-before)
		return d, nil
	}
	res, err := read(ctx, imp)
	if err != nil {
		return baseImageError(base.Name, err)
	}
	l.mu.Lock()
	top, err := li.platform(ctx, res)
	if err == nil {
		l.setActive(b.info.ID, li.imported)
	}
	l.mu.Unlock()
	if err != nil {
		return baseImageError(base.Name, err)
	}
	layers := append(slices.Clone(res.Layers), top)
	base.fill(layers, res.Defaults, li.total)
	if key != "" {
		d := res.Defaults
		l.cachePut(b.account, key, cacheEntry{Layers: layers, SizeBytes: li.total, LayerBytes: li.total, Defaults: &d})
	}
	info("imported %s: %d layers (the platform's last), %d bytes", base.Name, len(layers), li.total)
	return nil
}

// fill makes b the imported image of layers and defaults.
func (b *baseOf) fill(layers []string, d template.Defaults, bytes int64) {
	b.Layers, b.Defaults, b.Bytes = slices.Clone(layers), d, bytes
	b.Key = contentKey("", layers, d)
}

// contextImage finds the image archive (a file, or an OCI layout
// directory) at rel in the build context dir, and the sha256 of a file
// (a directory has none: it is read again at each build). A name a link
// leads out of the context is refused: it is looked up beneath dir (links
// inside it followed only while they stay inside), and the path handed on
// must reach the same file.
func contextImage(dir, rel string) (path, digest string, err error) {
	refused := func(why string) error {
		return sandbox.Errorf(sandbox.KindInvalid, "the base image archive %s: %s", rel, why)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", "", err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return "", "", refused("it is not in the build context (a link out of it is not followed)")
	}
	path = filepath.Join(dir, filepath.FromSlash(rel))
	if pfi, err := os.Stat(path); err != nil || !os.SameFile(fi, pfi) {
		return "", "", refused("it is not in the build context (a link out of it is not followed)")
	}
	if fi.IsDir() {
		return path, "", nil
	}
	if !fi.Mode().IsRegular() {
		return "", "", refused("it is neither a file nor a directory")
	}
	f, err := root.Open(rel)
	if err != nil {
		return "", "", refused(err.Error())
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", "", err
	}
	return path, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// baseImageError is an error reading the base image name, as the build's
// failure tells it: what the image reader found wrong with the image or
// its registry is said in full (it is about the image the build names);
// a bound or the disk keeps its kind.
func baseImageError(name string, err error) error {
	var se *sandbox.Error
	switch {
	case errors.Is(err, ociimage.ErrNotImage), errors.Is(err, ociimage.ErrInvalid), errors.Is(err, ociimage.ErrRegistry):
		return sandbox.Wrap(sandbox.KindInvalid, err, fmt.Sprintf("the base image %s: %v", name, err))
	case errors.Is(err, context.DeadlineExceeded):
		return sandbox.Wrap(sandbox.KindInvalid, err, fmt.Sprintf("the base image %s: not read within the build step's bound", name))
	case errors.As(err, &se):
		return sandbox.Wrap(se.Kind, err, fmt.Sprintf("the base image %s: %s", name, se.Message))
	}
	return fmt.Errorf("the base image %s: %w", name, err)
}
