package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/cluster"
	"github.com/withruntime/withruntime/internal/httpapi"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/volume"
)

// clusterVolumes is the volumes API of a many-host API server: a volume
// lives on one node (cluster.Control.VolumeHost picks it), and every call
// about it is forwarded to that node (nodeVolumes); while the node is not
// serving, the call is refused, never answered empty.
type clusterVolumes struct {
	ctl *cluster.Control
	st  store.Volumes
}

var _ httpapi.Volumes = (*clusterVolumes)(nil)

// noAnswer gives a call that got no answer from the node an error.
func noAnswer(err error) error {
	if err != nil && noderpc.IsTransportError(err) {
		return sandbox.Wrap(sandbox.KindInternal, err, "the volume's node did not answer")
	}
	return err
}

// on returns the client of the node of account's volume name and the
// node RPC's path pattern for it, with the call's query.
func (c *clusterVolumes) on(ctx context.Context, account, name, pattern, p string) (*noderpc.Client, string, error) {
	cl, _, err := c.ctl.VolumeNode(ctx, account, name)
	if err != nil {
		return nil, "", err
	}
	return cl, noderpc.VolumePath(pattern, name, url.Values{"account": {account}, "path": {p}}), nil
}

func (c *clusterVolumes) Create(ctx context.Context, account, name string, sizeGiB int) (api.Volume, error) {
	var out api.Volume
	if err := volume.CheckName(name); err != nil {
		return out, err
	}
	cl, err := c.ctl.VolumeHost(ctx)
	if err != nil {
		return out, err
	}
	req := noderpc.VolumeCreateRequest{Account: account, Name: name, SizeGiB: sizeGiB}
	return out, noAnswer(cl.Call(ctx, http.MethodPost, noderpc.PathVolumes, req, http.StatusCreated, &out))
}

// List reads the records from the store and asks each volume's node for
// what it holds; a volume whose node is not serving is listed as its
// record says (no used bytes, no mounts known): its GET says why.
func (c *clusterVolumes) List(ctx context.Context, account string) ([]api.Volume, error) {
	vols, err := c.st.ListVolumes(ctx, account)
	if err != nil {
		return nil, err
	}
	out := make([]api.Volume, 0, len(vols))
	for _, v := range vols {
		got, err := c.Get(ctx, v.Account, v.Name)
		if sandbox.KindOf(err) == sandbox.KindCapacityExhausted {
			got, err = api.Volume{Name: v.Name, SizeGiB: v.SizeGiB, CreatedAt: v.CreatedAt, MountedBy: []string{}}, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, got)
	}
	return out, nil
}

func (c *clusterVolumes) Get(ctx context.Context, account, name string) (api.Volume, error) {
	var out api.Volume
	cl, p, err := c.on(ctx, account, name, noderpc.PathVolume, "")
	if err != nil {
		return out, err
	}
	return out, noAnswer(cl.Call(ctx, http.MethodGet, p, nil, http.StatusOK, &out))
}

func (c *clusterVolumes) Delete(ctx context.Context, account, name string) error {
	cl, p, err := c.on(ctx, account, name, noderpc.PathVolume, "")
	if err != nil {
		return err
	}
	return noAnswer(cl.Call(ctx, http.MethodDelete, p, nil, http.StatusNoContent, nil))
}

// Resolve checks the mounts and that their volumes are on one live node;
// that node resolves and claims them again at the create (node.Config's
// Volumes), host dirs and all: nothing of a host is named here.
func (c *clusterVolumes) Resolve(ctx context.Context, account string, ms []api.VolumeMount) ([]sandbox.VolumeMount, func(), error) {
	in := make([]volume.Mount, 0, len(ms))
	names := make([]string, 0, len(ms))
	out := make([]sandbox.VolumeMount, 0, len(ms))
	for _, m := range ms {
		in = append(in, volume.Mount{Name: m.Name, Path: m.Path, ReadOnly: m.ReadOnly})
		names = append(names, m.Name)
		out = append(out, sandbox.VolumeMount{Name: m.Name, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	if err := volume.CheckMounts(in); err != nil {
		return nil, nil, err
	}
	if _, err := c.ctl.MountsNode(ctx, account, names); err != nil {
		return nil, nil, err
	}
	return out, func() {}, nil
}

func (c *clusterVolumes) Open(ctx context.Context, account, name, p string) (io.ReadCloser, int64, []api.VolumeEntry, error) {
	cl, path, err := c.on(ctx, account, name, noderpc.PathVolumeFiles, p)
	if err != nil {
		return nil, 0, nil, err
	}
	resp, err := cl.Stream(ctx, http.MethodGet, path, nil, http.StatusOK)
	if err != nil {
		return nil, 0, nil, noAnswer(err)
	}
	if resp.Header.Get(noderpc.HeaderVolumeDir) == "" {
		return resp.Body, resp.ContentLength, nil, nil
	}
	defer resp.Body.Close()
	var list api.VolumeFileList
	if err := json.NewDecoder(io.LimitReader(resp.Body, noderpc.MaxResponseBytes)).Decode(&list); err != nil {
		return nil, 0, nil, sandbox.Wrap(sandbox.KindInternal, err, "the volume's node answered a list that is not one")
	}
	return nil, 0, list.Entries, nil
}

// send streams r to the node's pattern path for the volume, wanting 204.
func (c *clusterVolumes) send(ctx context.Context, method, pattern, account, name, p string, r io.Reader) error {
	cl, path, err := c.on(ctx, account, name, pattern, p)
	if err != nil {
		return err
	}
	resp, err := cl.Stream(ctx, method, path, r, http.StatusNoContent)
	if err != nil {
		return noAnswer(err)
	}
	return resp.Body.Close()
}

func (c *clusterVolumes) Write(ctx context.Context, account, name, p string, r io.Reader) error {
	return c.send(ctx, http.MethodPut, noderpc.PathVolumeFiles, account, name, p, r)
}

func (c *clusterVolumes) Remove(ctx context.Context, account, name, p string) error {
	return c.send(ctx, http.MethodDelete, noderpc.PathVolumeFiles, account, name, p, nil)
}

func (c *clusterVolumes) Extract(ctx context.Context, account, name, p string, r io.Reader) error {
	return c.send(ctx, http.MethodPut, noderpc.PathVolumeArchive, account, name, p, r)
}

func (c *clusterVolumes) Archive(ctx context.Context, account, name, p string, w io.Writer) error {
	cl, path, err := c.on(ctx, account, name, noderpc.PathVolumeArchive, p)
	if err != nil {
		return err
	}
	resp, err := cl.Stream(ctx, http.MethodGet, path, nil, http.StatusOK)
	if err != nil {
		return noAnswer(err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}
