package server

import (
	"context"
	"io"
	"path/filepath"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/httpapi"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/storagequota"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/volume"
)

// openVolumes opens the volumes of a single box, or of node ("" on a
// single box): images in DATA/volumes, mounted under the run dir while
// the server runs, checked against quota.
func openVolumes(ctx context.Context, cfg Config, dataDir, node string, st store.Store, quota *storagequota.Quota, promised func() int64) (*volumeAPI, error) {
	host, err := volume.OpenHost(filepath.Join(dataDir, "volumes"), sandbox.RunDir("/run/withruntime-volumes", dataDir))
	if err != nil {
		return nil, err
	}
	svc, err := volume.NewService(ctx, volume.Config{
		Store: st, Host: host, Node: node, MaxSizeGiB: cfg.MaxVolumeGiB, Quota: quota,
		DiskPromised: promised, Logger: cfg.Logger,
	})
	if err != nil {
		host.Close()
		return nil, err
	}
	return &volumeAPI{svc}, nil
}

// storageQuota is the one quota (--storage-quota-gib) over an account's
// snapshots and volumes, both read from the store's records (every node's
// on many hosts), which the manager checks a snapshot against and the
// volumes a volume.
func storageQuota(bytes int64, st store.Store) *storagequota.Quota {
	q := &storagequota.Quota{Bytes: bytes}
	q.Add("snapshots", storagequota.Snapshots(st))
	q.Add("volumes", volume.QuotaSource(st))
	return q
}

// volumeAPI is the volume service as the API takes it.
type volumeAPI struct{ svc *volume.Service }

var _ httpapi.Volumes = (*volumeAPI)(nil)

func volumeView(v *volume.View) api.Volume {
	return api.Volume{Name: v.Name, SizeGiB: v.SizeGiB, UsedBytes: v.UsedBytes, CreatedAt: v.CreatedAt, MountedBy: v.MountedBy}
}

func (a *volumeAPI) Create(ctx context.Context, account, name string, sizeGiB int) (api.Volume, error) {
	v, err := a.svc.Create(ctx, account, name, sizeGiB)
	if err != nil {
		return api.Volume{}, err
	}
	return volumeView(v), nil
}

func (a *volumeAPI) List(ctx context.Context, account string) ([]api.Volume, error) {
	vs, err := a.svc.List(ctx, account)
	if err != nil {
		return nil, err
	}
	out := make([]api.Volume, 0, len(vs))
	for i := range vs {
		out = append(out, volumeView(&vs[i]))
	}
	return out, nil
}

func (a *volumeAPI) Get(ctx context.Context, account, name string) (api.Volume, error) {
	v, err := a.svc.Get(ctx, account, name)
	if err != nil {
		return api.Volume{}, err
	}
	return volumeView(v), nil
}

func (a *volumeAPI) Delete(ctx context.Context, account, name string) error {
	return a.svc.Delete(ctx, account, name)
}

func (a *volumeAPI) Resolve(ctx context.Context, account string, ms []api.VolumeMount) ([]sandbox.VolumeMount, func(), error) {
	in := make([]volume.Mount, 0, len(ms))
	for _, m := range ms {
		in = append(in, volume.Mount{Name: m.Name, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return a.svc.Resolve(ctx, account, in)
}

// resolveNamed is Resolve of the mounts an API server of many hosts sent
// a node (node.VolumeResolver): their names, paths and modes only.
func (a *volumeAPI) resolveNamed(ctx context.Context, account string, ms []sandbox.VolumeMount) ([]sandbox.VolumeMount, func(), error) {
	in := make([]volume.Mount, 0, len(ms))
	for _, m := range ms {
		in = append(in, volume.Mount{Name: m.Name, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return a.svc.Resolve(ctx, account, in)
}

func (a *volumeAPI) Open(ctx context.Context, account, name, p string) (io.ReadCloser, int64, []api.VolumeEntry, error) {
	o, err := a.svc.Open(ctx, account, name, p)
	if err != nil {
		return nil, 0, nil, err
	}
	if o.File != nil {
		return o.File, o.Size, nil, nil
	}
	out := make([]api.VolumeEntry, 0, len(o.Entries))
	for _, e := range o.Entries {
		out = append(out, api.VolumeEntry{Name: e.Name, Type: e.Type, Size: e.Size, Mode: e.Mode, UID: e.UID, GID: e.GID, MTime: e.ModTime})
	}
	return nil, 0, out, nil
}

func (a *volumeAPI) Write(ctx context.Context, account, name, p string, r io.Reader) error {
	_, err := a.svc.Write(ctx, account, name, p, r)
	return err
}

func (a *volumeAPI) Remove(ctx context.Context, account, name, p string) error {
	return a.svc.Remove(ctx, account, name, p)
}

func (a *volumeAPI) Archive(ctx context.Context, account, name, p string, w io.Writer) error {
	return a.svc.Archive(ctx, account, name, p, w)
}

func (a *volumeAPI) Extract(ctx context.Context, account, name, p string, r io.Reader) error {
	return a.svc.Extract(ctx, account, name, p, r)
}
