// Package selfcall serves HTTP requests with an http.Handler in-process:
// a RoundTripper for Go clients that call this server's own API (the MCP
// tools, the E2B translator) without a network hop, so every check the
// handler makes applies to them exactly as to a caller over the network.
package selfcall

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// Transport serves a request with Handler in-process. The answer streams:
// RoundTrip returns once the handler has written its header, and the body
// is what it writes after, as it writes it (exec and code streams pass
// through); closing the body early ends the handler's context.
type Transport struct{ Handler http.Handler }

func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	in := req.Clone(ctx)
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "in-process"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	if in.ContentLength == 0 && in.Body != http.NoBody {
		// A client's 0 with a body is "unknown" (a streamed body); a
		// server's is -1: a handler would take 0 as empty (ReverseProxy
		// drops such a body).
		in.ContentLength = -1
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer cancel()
		defer func() {
			p := recover()
			w.WriteHeader(http.StatusInternalServerError) // when nothing was written
			if p != nil {
				pw.CloseWithError(fmt.Errorf("in-process handler: %v", p))
			} else {
				pw.Close()
			}
			if req.Body != nil {
				req.Body.Close()
			}
		}()
		t.Handler.ServeHTTP(w, in)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing answered 200
	}()
	<-w.ready
	resp := &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &pipeBody{PipeReader: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}
	if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		resp.ContentLength = n
	}
	return resp, nil
}

// pipeResponse is the handler's side of Transport: the header is sent
// once, the body written into a pipe.
type pipeResponse struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{} // closed once status and sent are set
	status int
	sent   http.Header
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	if code < 200 {
		return // informational: the final header follows
	}
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush does nothing: every Write reaches the reader at once.
func (w *pipeResponse) Flush() {}

// pipeBody is the client's side: closing it ends the handler's writes and
// its context.
type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.CloseWithError(io.ErrClosedPipe)
}
