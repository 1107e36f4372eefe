package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// Volumes are named and persistent: they outlive the sandboxes that mount
// them (api.CreateSandboxRequest.Volumes). Paths inside a volume are
// absolute ("/" is its root).

// CreateVolume makes the volume name of sizeGiB in the key's account.
func (c *Client) CreateVolume(ctx context.Context, name string, sizeGiB int) (*api.Volume, error) {
	var v api.Volume
	if err := c.doJSON(ctx, http.MethodPost, api.Version+"/volumes", nil, api.CreateVolumeRequest{Name: name, SizeGiB: sizeGiB}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListVolumes returns the account's volumes, by name.
func (c *Client) ListVolumes(ctx context.Context) ([]api.Volume, error) {
	var l api.VolumeList
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/volumes", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Volumes, nil
}

// GetVolume returns the volume name.
func (c *Client) GetVolume(ctx context.Context, name string) (*api.Volume, error) {
	p, err := volumePath(name, "")
	if err != nil {
		return nil, err
	}
	var v api.Volume
	if err := c.doJSON(ctx, http.MethodGet, p, nil, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteVolume removes the volume name and its files; refused (conflict)
// while a live or paused sandbox mounts it.
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	p, err := volumePath(name, "")
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, p, nil, nil, nil)
}

// OpenVolumeFile opens the file at path in volume name for reading; the
// caller closes it.
func (c *Client) OpenVolumeFile(ctx context.Context, name, path string) (io.ReadCloser, error) {
	return c.volumeStream(ctx, name, "/files", path, "application/octet-stream")
}

// ReadVolumeFile returns the whole file at path in volume name.
func (c *Client) ReadVolumeFile(ctx context.Context, name, path string) ([]byte, error) {
	rc, err := c.OpenVolumeFile(ctx, name, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// ListVolumeFiles returns the entries of directory path in volume name.
func (c *Client) ListVolumeFiles(ctx context.Context, name, path string) ([]api.VolumeEntry, error) {
	p, err := volumePath(name, "/files")
	if err != nil {
		return nil, err
	}
	var l api.VolumeFileList
	if err := c.doJSON(ctx, http.MethodGet, p, url.Values{"path": {path}}, nil, &l); err != nil {
		return nil, err
	}
	return l.Entries, nil
}

// WriteVolumeFile writes r to path in volume name, making its parents.
func (c *Client) WriteVolumeFile(ctx context.Context, name, path string, r io.Reader) error {
	return c.volumePut(ctx, name, "/files", path, r, "application/octet-stream")
}

// DeleteVolumeFile removes a file, a link or an empty directory of volume
// name.
func (c *Client) DeleteVolumeFile(ctx context.Context, name, path string) error {
	p, err := volumePath(name, "/files")
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, p, url.Values{"path": {path}}, nil, nil)
}

// DownloadVolumeArchive returns path of volume name as a tar stream
// (symbolic links as links); the caller closes it.
func (c *Client) DownloadVolumeArchive(ctx context.Context, name, path string) (io.ReadCloser, error) {
	return c.volumeStream(ctx, name, "/archive", path, "application/x-tar")
}

// UploadVolumeArchive extracts the tar stream r into directory path of
// volume name (made if missing).
func (c *Client) UploadVolumeArchive(ctx context.Context, name, path string, r io.Reader) error {
	return c.volumePut(ctx, name, "/archive", path, r, "application/x-tar")
}

func (c *Client) volumeStream(ctx context.Context, name, suffix, path, accept string) (io.ReadCloser, error) {
	p, err := volumePath(name, suffix)
	if err != nil {
		return nil, err
	}
	req := request{method: http.MethodGet, path: p, query: url.Values{"path": {path}}, accept: accept}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	return &streamBody{ctx: ctx, op: req.op(c.baseURL), rc: resp.Body}, nil
}

func (c *Client) volumePut(ctx context.Context, name, suffix, path string, r io.Reader, contentType string) error {
	p, err := volumePath(name, suffix)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, request{method: http.MethodPut, path: p, query: url.Values{"path": {path}}, body: r, contentType: contentType})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func volumePath(name, suffix string) (string, error) {
	if name == "" {
		return "", errors.New("empty volume name")
	}
	return api.Version + "/volumes/" + url.PathEscape(name) + suffix, nil
}

// DownloadVolumeDir extracts directory remoteDir of volume name into
// localDir (made if missing), with DownloadDir's checks and bounds.
func (c *Client) DownloadVolumeDir(ctx context.Context, name, remoteDir, localDir string, opts ...DownloadOption) error {
	rc, err := c.DownloadVolumeArchive(ctx, name, remoteDir)
	if err != nil {
		return err
	}
	return extractDir(rc, localDir, opts)
}

// VolumePathIsDir reports whether path in volume name is a directory (else
// a regular file), from the answer's type, reading none of a file's bytes.
func (c *Client) VolumePathIsDir(ctx context.Context, name, path string) (bool, error) {
	p, err := volumePath(name, "/files")
	if err != nil {
		return false, err
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: p, query: url.Values{"path": {path}}, accept: "application/json, application/octet-stream"})
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"), nil
}
