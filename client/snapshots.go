package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/withruntime/withruntime/api"
)

// CreateSnapshot saves sandbox id whole (memory, processes and disk) as a
// snapshot labelled name (may be empty). The sandbox keeps running;
// CreateSandbox with req.Snapshot starts sandboxes from it. Snapshot, by
// contrast, makes a template of the file system only.
func (c *Client) CreateSnapshot(ctx context.Context, id, name string) (*api.Snapshot, error) {
	p, err := sandboxPath(id, "/snapshots")
	if err != nil {
		return nil, err
	}
	var sn api.Snapshot
	if err := c.doJSON(ctx, http.MethodPost, p, nil, api.CreateSnapshotRequest{Name: name}, &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// Fork starts count sandboxes (1 to 16) from a snapshot of sandbox id taken
// now, all or none. The snapshot is removed once they run unless
// keepSnapshot; then the result names it.
func (c *Client) Fork(ctx context.Context, id string, count int, keepSnapshot bool) (*api.ForkResult, error) {
	p, err := sandboxPath(id, "/fork")
	if err != nil {
		return nil, err
	}
	var res api.ForkResult
	if err := c.doJSON(ctx, http.MethodPost, p, nil, api.ForkRequest{Count: count, KeepSnapshot: keepSnapshot}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListSnapshots returns the account's snapshots, newest first.
func (c *Client) ListSnapshots(ctx context.Context) ([]api.Snapshot, error) {
	var l api.SnapshotList
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/snapshots", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Snapshots, nil
}

// GetSnapshot returns snapshot sid.
func (c *Client) GetSnapshot(ctx context.Context, sid string) (*api.Snapshot, error) {
	p, err := snapshotPath(sid)
	if err != nil {
		return nil, err
	}
	var sn api.Snapshot
	if err := c.doJSON(ctx, http.MethodGet, p, nil, nil, &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// DeleteSnapshot removes snapshot sid; sandboxes started from it run on.
func (c *Client) DeleteSnapshot(ctx context.Context, sid string) error {
	p, err := snapshotPath(sid)
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, p, nil, nil, nil)
}

func snapshotPath(sid string) (string, error) {
	if sid == "" {
		return "", errors.New("empty snapshot id")
	}
	return api.Version + "/snapshots/" + url.PathEscape(sid), nil
}
