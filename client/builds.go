package client

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/withruntime/withruntime/api"
)

// BuildTemplate starts a template build of spec (the build specification:
// JSON bytes, or a value that encodes to it, e.g. a map) and returns the
// build, queued: follow it with TemplateBuildLogs, look at it with
// GetTemplateBuild. buildContext, when not nil, is a tar of the build
// context (the files copy steps take, named relative to the context's
// root); it is sent after the spec as one tar (the API's
// application/x-tar form) and streamed as it is read.
func (c *Client) BuildTemplate(ctx context.Context, spec any, buildContext io.Reader) (*api.TemplateBuild, error) {
	var data []byte
	switch v := spec.(type) {
	case []byte:
		data = v
	case json.RawMessage:
		data = v
	default:
		var err error
		if data, err = json.Marshal(spec); err != nil {
			return nil, fmt.Errorf("encoding the build specification: %w", err)
		}
	}
	req := request{method: http.MethodPost, path: api.Version + "/templates", body: bytes.NewReader(data), contentType: "application/json"}
	if buildContext != nil {
		// The spec's entry, without the archive's end, then the context's
		// archive, whose end ends the whole.
		var head bytes.Buffer
		tw := tar.NewWriter(&head)
		if err := tw.WriteHeader(&tar.Header{Name: api.BuildSpecEntry, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			return nil, err
		}
		tw.Write(data)
		if err := tw.Flush(); err != nil {
			return nil, err
		}
		req.body, req.contentType = io.MultiReader(&head, buildContext), "application/x-tar"
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var b api.TemplateBuild
	if err := decodeJSON(ctx, req.op(c.baseURL), resp, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// GetTemplateBuild returns build id of the key's account.
func (c *Client) GetTemplateBuild(ctx context.Context, id string) (*api.TemplateBuild, error) {
	var b api.TemplateBuild
	if err := c.doJSON(ctx, http.MethodGet, api.Version+"/templates/builds/"+url.PathEscape(id), nil, nil, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// maxBuildLogLine bounds one line of a build's log stream.
const maxBuildLogLine = 1 << 20

// TemplateBuildLogs calls fn with each event of build id's log, from the
// oldest the server keeps; with follow, until the build ends (its last
// event has type api.BuildLogEnd), else what is there now. An error of fn
// ends the stream and is returned.
func (c *Client) TemplateBuildLogs(ctx context.Context, id string, follow bool, fn func(api.BuildLogEvent) error) error {
	r := request{method: http.MethodGet, path: api.Version + "/templates/builds/" + url.PathEscape(id) + "/logs", accept: "application/x-ndjson"}
	if !follow {
		r.query = url.Values{"follow": {"false"}}
	}
	op := r.op(c.baseURL)
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := newEventDecoder(resp.Body, maxBuildLogLine)
	for {
		var ev api.BuildLogEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return transportError(ctx, op, err)
		}
		if err := fn(ev); err != nil {
			return err
		}
		if ev.Type == api.BuildLogEnd {
			return nil
		}
	}
}
