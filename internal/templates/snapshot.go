package templates

import (
	"context"
	"errors"
	"io"

	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template"
)

// Snapshot makes template name of account from running sandbox id: its
// template's layers (or the built-in image) and, over them, what the
// sandbox wrote in its root file system, as one new layer. The sandbox
// keeps running. The layer is read from the backend's stream as it comes,
// bounded by Config.Limits, the account's quota and the free disk
// (disk.go): a sandbox that wrote more is refused, and nothing of it
// stays. It is the only copy the snapshot writes.
func (l *Library) Snapshot(ctx context.Context, account, id, name string) (*template.Template, error) {
	ref, err := parse(name)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, byQuota, err := l.writeLimits(ctx, account, ref)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	type exported struct {
		rec *sandbox.Record
		err error
	}
	done := make(chan exported, 1)
	go func() {
		rec, err := l.cfg.Sandboxes.ExportRoot(ctx, account, id, pw)
		pw.CloseWithError(err)
		done <- exported{rec, err}
	}()
	info, err := l.cfg.Layers.Import(ctx, pr, layer.Overlay, lim)
	// A refused stream ends the export: its writer fails from now on.
	pr.CloseWithError(io.ErrClosedPipe)
	ex := <-done
	if err != nil && ex.err != nil && errors.Is(err, ex.err) {
		// The export failed, and the import read its failure.
		return nil, ex.err
	}
	if err != nil {
		// The import refused the stream: that is why the export was cut
		// short, if it was.
		return nil, quotaError(layerError(err), byQuota, account, lim)
	}
	if ex.err != nil {
		l.dropUnrecorded(info.Digest)
		return nil, ex.err
	}
	t, err := l.withParent(ctx, account, ref, ex.rec.Spec.Root)
	if err != nil {
		l.dropUnrecorded(info.Digest)
		return nil, err
	}
	t.Source = template.SourceSnapshot
	t.Layers = append(t.Layers, info.Digest)
	t.SizeBytes = info.SizeBytes
	if err := l.record(ctx, t); err != nil {
		l.dropUnrecorded(info.Digest)
		return nil, err
	}
	l.log.Info("template made", "template_id", t.ID, "template", t.Ref().String(), "account", account, "source", t.Source, "sandbox_id", id, "bytes", info.SizeBytes)
	return t, nil
}

// dropUnrecorded removes a layer a failed write imported, unless a record
// names it (the same content stored before). The caller holds l.mu.
func (l *Library) dropUnrecorded(digest string) {
	ts, err := l.cfg.Store.ListTemplates(context.Background(), storeAll)
	if err != nil {
		return
	}
	for _, t := range ts {
		for _, d := range t.Layers {
			if d == digest {
				return
			}
		}
	}
	l.cfg.Layers.Remove(digest)
}
