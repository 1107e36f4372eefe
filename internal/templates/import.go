package templates

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/ociimage"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// Import makes template name of account from the OCI image in archive (a
// docker save tarball, or an OCI archive): its layers, bottom first, then
// the platform layer (what a sandbox needs that the image may lack,
// internal/ociimage), with the image's config as the defaults. The
// archive is kept in Config.TempDir while it is read (the image formats
// need to seek), bounded by the account's quota and the free disk
// (disk.go), and removed after: at its peak an import holds the archive
// and the layers made of it, two copies.
func (l *Library) Import(ctx context.Context, account, name string, archive io.Reader) (*template.Template, error) {
	ref, err := parse(name)
	if err != nil {
		return nil, err
	}
	lim, byQuota, err := l.writeLimits(ctx, account, ref)
	if err != nil {
		return nil, err
	}
	if err := l.checkDisk(diskCheckEvery); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(l.cfg.TempDir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(l.cfg.TempDir, "image-*.tar")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// An archive holds its layers, compressed or not, so it is hardly
	// larger than what they unpack to: one past the layers' bound would
	// make layers past it too, and it is cut there.
	limit := lim.MaxBytes
	n, err := io.Copy(f, l.diskChecked(io.LimitReader(archive, limit+1)))
	if sandbox.KindOf(err) == sandbox.KindCapacityExhausted {
		return nil, err
	}
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInvalid, err, "reading the image archive")
	}
	if limit > 0 && n > limit {
		return nil, quotaError(sandbox.Errorf(sandbox.KindPayloadTooLarge, "the image archive is over %d bytes", limit), byQuota, account, lim)
	}

	return l.importImage(ctx, account, ref, func(ctx context.Context, imp ociimage.ImportFunc) (*ociimage.Result, error) {
		return ociimage.ReadFile(ctx, f.Name(), ociimage.Options{CARoots: l.cfg.CARoots}, imp)
	})
}

// ImportRef makes template name of account from the image at a registry
// reference (registry/repository:tag or @digest), read anonymously. The
// registry must be at a public address unless Config.PrivateRegistries.
func (l *Library) ImportRef(ctx context.Context, account, name, imageRef string) (*template.Template, error) {
	ref, err := parse(name)
	if err != nil {
		return nil, err
	}
	return l.importImage(ctx, account, ref, func(ctx context.Context, imp ociimage.ImportFunc) (*ociimage.Result, error) {
		return ociimage.ReadRemote(ctx, imageRef, ociimage.Options{CARoots: l.cfg.CARoots, AllowPrivateRegistry: l.cfg.PrivateRegistries}, imp)
	})
}

// importImage imports the layers read gives, bottom first, then the
// platform layer, and records the template.
func (l *Library) importImage(ctx context.Context, account string, ref template.Ref, read func(context.Context, ociimage.ImportFunc) (*ociimage.Result, error)) (*template.Template, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	li, err := l.newLayerImporter(ctx, account, ref)
	if err != nil {
		return nil, err
	}
	res, err := read(ctx, li.importLayer)
	if err != nil {
		l.dropUnused(li.imported)
		return nil, imageError(err)
	}
	top, err := li.platform(ctx, res)
	if err != nil {
		l.dropUnused(li.imported)
		return nil, err
	}
	t := &template.Template{
		Account: account, Name: ref.Name, Tag: ref.Tag, Source: template.SourceOCI,
		Layers: append(res.Layers, top), SizeBytes: li.total, Defaults: res.Defaults,
	}
	if err := l.record(ctx, t); err != nil {
		l.dropUnused(li.imported)
		return nil, err
	}
	l.log.Info("template made", "template_id", t.ID, "template", t.Ref().String(), "account", account, "source", t.Source, "layers", len(t.Layers), "bytes", li.total)
	return t, nil
}

// layerImporter imports an image's layers for a new template of account
// (an import's, or a build's base), its bytes bounded all together by
// Config.Limits and what the account's quota has left (writeLimits).
type layerImporter struct {
	l        *Library
	account  string
	limits   layer.Limits
	byQuota  bool
	imported []string // the layers imported, the platform's too
	total    int64
}

func (l *Library) newLayerImporter(ctx context.Context, account string, ref template.Ref) (*layerImporter, error) {
	limits, byQuota, err := l.writeLimits(ctx, account, ref)
	if err != nil {
		return nil, err
	}
	return &layerImporter{l: l, account: account, limits: limits, byQuota: byQuota}, nil
}

// importLayer is the ociimage.ImportFunc. Its caller holds l.mu.
func (li *layerImporter) importLayer(ctx context.Context, r io.Reader) (string, error) {
	lim := li.limits
	if lim.MaxBytes > 0 {
		lim.MaxBytes -= li.total
		if lim.MaxBytes <= 0 {
			return "", quotaError(sandbox.Errorf(sandbox.KindPayloadTooLarge, "the image's layers are over %d bytes", li.limits.MaxBytes), li.byQuota, li.account, li.limits)
		}
	}
	info, err := li.l.cfg.Layers.Import(ctx, r, layer.OCI, lim)
	if err != nil {
		return "", quotaError(layerError(err), li.byQuota, li.account, li.limits)
	}
	li.imported = append(li.imported, info.Digest)
	li.total += info.SizeBytes
	return info.Digest, nil
}

// platform imports res's platform layer. Its caller holds l.mu.
func (li *layerImporter) platform(ctx context.Context, res *ociimage.Result) (string, error) {
	top, err := li.importLayer(ctx, bytes.NewReader(res.Platform))
	if err != nil {
		return "", fmt.Errorf("the platform layer: %w", err)
	}
	return top, nil
}

// dropUnused removes the layers of digests that no template, build cache
// entry or running build names: what a failed import wrote, but not a
// layer it found stored already for another's use. The caller holds l.mu.
func (l *Library) dropUnused(digests []string) {
	if len(digests) == 0 {
		return
	}
	ts, err := l.cfg.Store.ListTemplates(context.Background(), storeAll)
	if err != nil {
		return
	}
	keep := map[string]bool{}
	for _, t := range ts {
		for _, d := range t.Layers {
			keep[d] = true
		}
	}
	l.buildKeep(keep)
	for _, d := range digests {
		if !keep[d] {
			l.cfg.Layers.Remove(d)
		}
	}
}

// imageError is an image refused by internal/ociimage as the API answers
// it: the archive's fault is invalid_request.
func imageError(err error) error {
	var se *sandbox.Error
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, ociimage.ErrNotImage), errors.Is(err, ociimage.ErrInvalid):
		return sandbox.Wrap(sandbox.KindInvalid, err, "the archive is not an image this server reads")
	case errors.Is(err, ociimage.ErrRegistry):
		return sandbox.Wrap(sandbox.KindInvalid, err, "the registry refused")
	}
	return err
}
