package templates

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// Templates never fill the host's disk. What an import (its archive in
// TempDir, then its layers), a snapshot or a build step writes is checked
// against the free space of Config.DiskDir's file system before it starts
// and again every diskCheckEvery bytes as it goes: the write is refused
// with capacity_exhausted, and what it wrote removed, once the free space
// would drop below what admission promised to the live sandboxes (their
// disk quotas over the overcommit ratio: the manager's DiskPromised) plus
// Config.DiskReserve. A write is checked as it goes rather than for its
// bound up front: that bound (the account's remaining quota, 50 GiB by
// default) is far above most images, whose size is not known until read.
// Paused sandboxes are not promised anything: what they hold is written
// already, so it is missing from the free space.

// DefaultDiskReserve is Config.DiskReserve's default: room for the file
// system's own blocks (inodes, directories) that a layer's bytes do not
// count, and for the writes of other imports at the same time.
const DefaultDiskReserve = int64(64) << 20

// diskCheckEvery is how many bytes a template write may read between two
// looks at the free space: each look asks for that much room, so a write
// never passes the line by more than it.
const diskCheckEvery = int64(4) << 20

// DiskPromiser is what the sandboxes (the manager) tell of the disk their
// admission handed out, when Config.Sandboxes is one.
type DiskPromiser interface {
	// DiskPromised is the bytes of the data dir's free space that the
	// live sandboxes' disk quotas are counted as holding.
	DiskPromised() int64
}

// checkDisk refuses a write of need more bytes when the free space of
// Config.DiskDir's file system, less the sandboxes' promised disk and the
// reserve, is under it.
func (l *Library) checkDisk(need int64) error {
	if l.cfg.DiskDir == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(l.cfg.DiskDir, &st); err != nil {
		return fmt.Errorf("reading the free space of %s: %w", l.cfg.DiskDir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	var promised int64
	if p, ok := l.cfg.Sandboxes.(DiskPromiser); ok {
		promised = p.DiskPromised()
	}
	if free-promised-l.cfg.DiskReserve < need {
		return sandbox.Errorf(sandbox.KindCapacityExhausted,
			"this host's disk is full for templates: %d MiB are free, live sandboxes are promised %d MiB of it and %d MiB stay in reserve; remove unused templates or try again later",
			free>>20, promised>>20, l.cfg.DiskReserve>>20)
	}
	return nil
}

// diskChecked is r, checked against the free space as it is read
// (checkDisk of diskCheckEvery bytes before each diskCheckEvery bytes).
func (l *Library) diskChecked(r io.Reader) io.Reader {
	if l.cfg.DiskDir == "" {
		return r
	}
	return &diskReader{l: l, r: r}
}

type diskReader struct {
	l    *Library
	r    io.Reader
	left int64 // bytes that may be read before the next look
}

func (d *diskReader) Read(p []byte) (int, error) {
	if d.left <= 0 {
		if err := d.l.checkDisk(diskCheckEvery); err != nil {
			return 0, err
		}
		d.left = diskCheckEvery
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.r.Read(p)
	d.left -= int64(n)
	return n, err
}

// checkedLayers is the layer store whose every import is read through
// diskChecked: what the library writes of a layer, whoever asks for it.
type checkedLayers struct {
	Layers
	l *Library
}

func (c *checkedLayers) Import(ctx context.Context, r io.Reader, f layer.Format, lim layer.Limits) (layer.Info, error) {
	if err := c.l.checkDisk(diskCheckEvery); err != nil {
		return layer.Info{}, err
	}
	return c.Layers.Import(ctx, c.l.diskChecked(r), f, lim)
}

// writeLimits is Config.Limits for a new template of account at ref, its
// bytes bounded too by what the account's quota has left (the live
// template ref replaces does not count: ReplaceTemplate frees it), so that
// a write past the quota stops there rather than at the end. byQuota says
// that bound is the quota's: a write past it is refused as the quota is.
func (l *Library) writeLimits(ctx context.Context, account string, ref template.Ref) (lim layer.Limits, byQuota bool, err error) {
	lim = l.cfg.Limits
	if l.cfg.Quota.MaxBytes <= 0 {
		return lim, false, nil
	}
	_, held, err := l.cfg.Store.TemplateUsage(ctx, account)
	if err != nil {
		return lim, false, err
	}
	if cur, err := l.cfg.Store.TemplateByRef(ctx, account, ref); err == nil && cur.Account == account {
		held -= cur.SizeBytes
	}
	left := l.cfg.Quota.MaxBytes - held
	if left <= 0 {
		return lim, true, sandbox.Errorf(store.ErrTemplateQuota.Kind, "account %s holds %d bytes of templates, its quota of %d", account, held, l.cfg.Quota.MaxBytes)
	}
	if lim.MaxBytes > 0 && lim.MaxBytes <= left {
		return lim, false, nil
	}
	lim.MaxBytes = left
	return lim, true, nil
}

// quotaError is err, a write refused past writeLimits' bound, as the
// quota refuses it when byQuota.
func quotaError(err error, byQuota bool, account string, lim layer.Limits) error {
	if !byQuota || sandbox.KindOf(err) != sandbox.KindPayloadTooLarge {
		return err
	}
	return sandbox.Wrap(store.ErrTemplateQuota.Kind, err, fmt.Sprintf("account %s's template quota has %d bytes left", account, lim.MaxBytes))
}
