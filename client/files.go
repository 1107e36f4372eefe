package client

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"

	"github.com/withruntime/withruntime/api"
)

// Paths inside a sandbox are resolved by the sandbox: relative ones land in
// /workspace.

// AsFilesUser returns a copy of c whose file and archive calls act as user
// (api.UserDefault or api.UserRoot): what they make belongs to that user.
// Commands choose their user in api.ExecRequest.User instead.
func (c *Client) AsFilesUser(user string) *Client {
	cp := *c
	cp.filesUser = user
	return &cp
}

// pathQuery is the query naming path, and the files user when set.
func (c *Client) pathQuery(path string) url.Values {
	q := url.Values{"path": {path}}
	if c.filesUser != "" {
		q.Set("user", c.filesUser)
	}
	return q
}

// OpenFile opens the file at path in sandbox id for reading. The caller
// closes it. A read that breaks midway returns a *TransportError.
func (c *Client) OpenFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	return c.openStream(ctx, id, "/files", path, "application/octet-stream")
}

// ReadFile returns the whole file at path in sandbox id.
func (c *Client) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	rc, err := c.OpenFile(ctx, id, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// WriteFile writes r to path in sandbox id, making its parent directories,
// and returns the file as written. A zero mode takes the server's default
// (0644); only the permission bits are sent. One file is at most
// api.MaxFileBody bytes: move larger trees with UploadArchive or UploadDir.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) (*api.FileInfo, error) {
	return c.WriteFileWith(ctx, id, path, r, WriteFileOptions{Mode: mode})
}

// WriteFileOptions shape a write.
type WriteFileOptions struct {
	// Mode is the file's permission bits; zero takes the server's
	// default (0644).
	Mode fs.FileMode
	// Attrs are extended attributes in the user namespace (names
	// without "user.") set on the written file, at most
	// api.MaxFileAttrBytes in all; the file keeps no others.
	Attrs map[string]string
}

// WriteFileWith is WriteFile with options.
func (c *Client) WriteFileWith(ctx context.Context, id, path string, r io.Reader, o WriteFileOptions) (*api.FileInfo, error) {
	p, err := sandboxPath(id, "/files")
	if err != nil {
		return nil, err
	}
	q := c.pathQuery(path)
	if o.Mode != 0 {
		q.Set("mode", fmt.Sprintf("%04o", uint32(o.Mode.Perm())))
	}
	for name, value := range o.Attrs {
		q.Add("attr", name+"="+value)
	}
	req := request{method: http.MethodPut, path: p, query: q, body: r, contentType: "application/octet-stream", maxBody: maxInfoBody}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var fi api.FileInfo
	if err := decodeJSON(ctx, req.op(c.baseURL), resp, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// ListFiles returns the entries of directory path in sandbox id.
func (c *Client) ListFiles(ctx context.Context, id, path string) ([]api.FileInfo, error) {
	l, err := c.ListFilesWith(ctx, id, path, ListFilesOptions{})
	if err != nil {
		return nil, err
	}
	return l.Entries, nil
}

// ListFilesOptions shape a directory listing.
type ListFilesOptions struct {
	// Limit, from 1 to api.MaxListLimit, bounds the entries returned
	// (0: all): the listing then says Truncated when the directory holds
	// more.
	Limit int
}

// ListFilesWith lists directory path in sandbox id as opts ask.
func (c *Client) ListFilesWith(ctx context.Context, id, path string, opts ListFilesOptions) (*api.FileList, error) {
	p, err := sandboxPath(id, "/files/list")
	if err != nil {
		return nil, err
	}
	q := c.pathQuery(path)
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var l api.FileList
	if err := c.doJSON(ctx, http.MethodGet, p, q, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// StatFile describes path in sandbox id without following a final symbolic
// link. An answer over 64 KiB (no real file's description comes near) is
// a *TransportError.
func (c *Client) StatFile(ctx context.Context, id, path string) (*api.FileInfo, error) {
	return c.fileInfoCall(ctx, http.MethodGet, id, "/files/stat", path)
}

// MakeDir makes directory path in sandbox id, with its parents.
func (c *Client) MakeDir(ctx context.Context, id, path string) (*api.FileInfo, error) {
	return c.fileInfoCall(ctx, http.MethodPost, id, "/files/mkdir", path)
}

// RemoveFile removes path in sandbox id; a directory with contents needs
// recursive.
func (c *Client) RemoveFile(ctx context.Context, id, path string, recursive bool) error {
	p, err := sandboxPath(id, "/files")
	if err != nil {
		return err
	}
	q := c.pathQuery(path)
	if recursive {
		q.Set("recursive", "true")
	}
	return c.doJSON(ctx, http.MethodDelete, p, q, nil, nil)
}

func (c *Client) fileInfoCall(ctx context.Context, method, id, suffix, path string) (*api.FileInfo, error) {
	p, err := sandboxPath(id, suffix)
	if err != nil {
		return nil, err
	}
	var fi api.FileInfo
	r := request{method: method, path: p, query: c.pathQuery(path), maxBody: maxInfoBody}
	if err := c.doJSONRequest(ctx, r, nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// openStream opens a streamed download; reads that break become
// *TransportError.
func (c *Client) openStream(ctx context.Context, id, suffix, path, accept string) (io.ReadCloser, error) {
	p, err := sandboxPath(id, suffix)
	if err != nil {
		return nil, err
	}
	req := request{method: http.MethodGet, path: p, query: c.pathQuery(path), accept: accept}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	return &streamBody{ctx: ctx, op: req.op(c.baseURL), rc: resp.Body}, nil
}

// streamBody classifies the read errors of a response body.
type streamBody struct {
	ctx context.Context
	op  string
	rc  io.ReadCloser
}

func (s *streamBody) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	if err != nil && err != io.EOF {
		err = transportError(s.ctx, s.op, err)
	}
	return n, err
}

func (s *streamBody) Close() error { return s.rc.Close() }
