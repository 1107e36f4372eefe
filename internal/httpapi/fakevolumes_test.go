package httpapi

import (
	"archive/tar"
	"context"
	"io"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// fakeVolumes answers every volume call with success: the route tests
// check the API's edge (keys, kinds, the spec), internal/volume and the
// e2e tests the volumes themselves.
type fakeVolumes struct{}

func (fakeVolumes) Create(_ context.Context, _, name string, size int) (api.Volume, error) {
	return api.Volume{Name: name, SizeGiB: size, CreatedAt: time.Now().UTC(), MountedBy: []string{}}, nil
}

func (f fakeVolumes) List(ctx context.Context, account string) ([]api.Volume, error) {
	v, _ := f.Create(ctx, account, "data", 1)
	return []api.Volume{v}, nil
}

func (f fakeVolumes) Get(ctx context.Context, account, name string) (api.Volume, error) {
	return f.Create(ctx, account, name, 1)
}

func (fakeVolumes) Delete(context.Context, string, string) error { return nil }

func (fakeVolumes) Resolve(_ context.Context, _ string, ms []api.VolumeMount) ([]sandbox.VolumeMount, func(), error) {
	var out []sandbox.VolumeMount
	for _, m := range ms {
		out = append(out, sandbox.VolumeMount{ID: "vol_0", Name: m.Name, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return out, func() {}, nil
}

func (fakeVolumes) Open(context.Context, string, string, string) (io.ReadCloser, int64, []api.VolumeEntry, error) {
	return io.NopCloser(strings.NewReader("hi")), 2, nil, nil
}

func (fakeVolumes) Write(_ context.Context, _, _, _ string, r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

func (fakeVolumes) Remove(context.Context, string, string, string) error { return nil }

func (fakeVolumes) Archive(_ context.Context, _, _, _ string, w io.Writer) error {
	return tar.NewWriter(w).Close()
}

func (fakeVolumes) Extract(_ context.Context, _, _, _ string, r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}
