package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// A template is named "name" (tag latest) or "name:tag"; a name may have
// two parts joined by "/" (myteam/app). The server checks the shape and
// refuses a wrong one with invalid_request; the client only keeps the
// name from changing the route it is sent to.

// ListTemplates returns the account's templates and the public ones, by
// name and tag.
func (c *Client) ListTemplates(ctx context.Context) ([]api.Template, error) {
	var l api.TemplateList
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/templates", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Templates, nil
}

// GetTemplate returns template name ("name" or "name:tag").
func (c *Client) GetTemplate(ctx context.Context, name string) (*api.Template, error) {
	return c.templateCall(ctx, http.MethodGet, name)
}

// DeleteTemplate removes template name ("name" or "name:tag") and returns
// it as it was removed: its name is free at once; while sandboxes, pools
// or paused sandboxes still use it its state is "deleting", and its
// storage goes with the last of them.
func (c *Client) DeleteTemplate(ctx context.Context, name string) (*api.Template, error) {
	return c.templateCall(ctx, http.MethodDelete, name)
}

// ImportTemplate makes template name ("name" or "name:tag") from an image
// archive read from archive: a docker save tarball or an OCI archive
// (skopeo copy ... oci-archive:). The archive is streamed as it is read.
// The image's env, working directory, user and command become the
// template's defaults.
func (c *Client) ImportTemplate(ctx context.Context, name string, archive io.Reader) (*api.Template, error) {
	return c.importTemplate(ctx, name, url.Values{"name": {name}}, archive)
}

// ImportTemplateRef makes template name from the image at imageRef
// (registry/repository:tag or @sha256:...), which the server reads from
// its registry.
func (c *Client) ImportTemplateRef(ctx context.Context, name, imageRef string) (*api.Template, error) {
	return c.importTemplate(ctx, name, url.Values{"name": {name}, "ref": {imageRef}}, nil)
}

// importTemplate is an import of template name with query, whose image is
// body (nil: the registry's, named in the query).
func (c *Client) importTemplate(ctx context.Context, name string, query url.Values, body io.Reader) (*api.Template, error) {
	if name == "" {
		return nil, badTemplateName(name, "empty")
	}
	req := request{method: http.MethodPost, path: api.Version + "/templates/import", query: query}
	if body != nil {
		req.body, req.contentType = body, "application/x-tar"
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var t api.Template
	if err := decodeJSON(ctx, req.op(c.baseURL), resp, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Snapshot makes template name ("name" or "name:tag") from the file
// system of sandbox id as it is now. The sandbox keeps running; what its
// processes hold in memory is not part of a template (CreateSnapshot
// keeps that too).
func (c *Client) Snapshot(ctx context.Context, id, name string) (*api.Template, error) {
	if name == "" {
		return nil, badTemplateName(name, "empty")
	}
	p, err := sandboxPath(id, "/snapshot")
	if err != nil {
		return nil, err
	}
	var t api.Template
	if err := c.doJSON(ctx, http.MethodPost, p, nil, api.SnapshotRequest{Template: name}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// PublishTemplate shows the admin account's template name to every
// account (public true), or takes that back (false). Admin key only.
func (c *Client) PublishTemplate(ctx context.Context, name string, public bool) (*api.Template, error) {
	p, err := templatePath(name)
	if err != nil {
		return nil, err
	}
	var t api.Template
	if err := c.doJSON(ctx, http.MethodPost, p+"/publish", nil, api.PublishRequest{Public: public}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

func (c *Client) templateCall(ctx context.Context, method, name string) (*api.Template, error) {
	p, err := templatePath(name)
	if err != nil {
		return nil, err
	}
	var t api.Template
	if err := c.doJSON(ctx, method, p, nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// templatePath is the route of template name. The route's {name} is one
// path segment, so the whole name is escaped, its "/" as %2F. A name with
// a part between "/" that is empty, "." or ".." is refused here, as the
// server would refuse it: some proxies unescape %2F and clean the path,
// which would send the call to another route.
func templatePath(name string) (string, error) {
	if name == "" {
		return "", badTemplateName(name, "empty")
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return "", badTemplateName(name, "a part between \"/\" is empty, \".\" or \"..\"")
		}
	}
	return api.Version + "/templates/" + url.PathEscape(name), nil
}

// badTemplateName is the invalid_request of a name refused before it is
// sent, as the server would refuse it.
func badTemplateName(name, why string) error {
	return &APIError{Code: CodeInvalidRequest, Status: http.StatusBadRequest,
		Message: fmt.Sprintf("bad template name %q: %s", name, why)}
}
