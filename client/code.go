package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/withruntime/withruntime/api"
)

// CodeOptions says where a cell's output goes as it is produced. Every
// callback is optional. Execution keeps a stream without a callback whole;
// of a stream with a Stdout or Stderr callback it keeps only the last
// OutputCap bytes (as Exec does), so a caller that streams a long cell
// holds its end, not all of it; results are kept whole.
type CodeOptions struct {
	Stdout func(text string)
	Stderr func(text string)
	Result func(r api.CodeResult)
	// Discard keeps nothing in Execution of what went to a callback: a
	// caller that keeps what it needs itself (a bounded tail, the first
	// results) then holds no second copy of a long cell's output.
	Discard bool
}

// Execution is how a cell ended: its rich results (the cell's value and
// its displays, such as plots) in the order produced, its output in the
// chunks it came in, and the exception it raised, if any.
type Execution struct {
	Results []api.CodeResult
	Stdout  []string
	Stderr  []string
	// Error is the exception the cell ended with: one it raised, or
	// TimeoutError (timeout_ms interrupted it) or DeadKernelError (its
	// kernel died and was restarted).
	Error          *api.CodeException
	ExecutionCount int
}

// Text returns the text of the cell's value (the last expression's), or ""
// when it had none.
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

// errCodeStreamEnded is the cause of a TransportError for a code stream
// that ended before its "end" event.
var errCodeStreamEnded = errors.New("code stream ended before its end event")

// RunCode runs a cell of Python in a context of sandbox id (the default
// context when req.ContextID is empty) and waits for it to end, calling
// opts' callbacks as output arrives. An exception in the cell, a timeout
// or the kernel's death is in Execution.Error, not an error. An "error"
// event from the server is an *APIError; a stream that breaks before the
// cell's end is a *TransportError.
func (c *Client) RunCode(ctx context.Context, id string, req api.CodeRequest, opts CodeOptions) (*Execution, error) {
	p, err := sandboxPath(id, "/code")
	if err != nil {
		return nil, err
	}
	r, err := streamPost(p, req)
	if err != nil {
		return nil, err
	}
	op := r.op(c.baseURL)
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()

	ex := &Execution{}
	stdout, stderr := chunkTail{chunks: &ex.Stdout}, chunkTail{chunks: &ex.Stderr}
	dec := newEventDecoder(resp.Body, maxCodeLine)
	for {
		var ev api.CodeEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = errCodeStreamEnded
			}
			return nil, callError(ctx, op, err)
		}
		switch ev.Type {
		case api.CodeEventStdout:
			stdout.add(ev.Text, opts.Stdout, opts.Discard)
		case api.CodeEventStderr:
			stderr.add(ev.Text, opts.Stderr, opts.Discard)
		case api.CodeEventResult:
			if ev.Result == nil {
				continue
			}
			if opts.Result == nil || !opts.Discard {
				ex.Results = append(ex.Results, *ev.Result)
			}
			if opts.Result != nil {
				opts.Result(*ev.Result)
			}
		case api.CodeEventException:
			ex.Error = ev.Exception
		case api.CodeEventError:
			return nil, apiErrorFromEvent(ev.Error)
		case api.CodeEventEnd:
			ex.ExecutionCount = ev.ExecutionCount
			// Read what little may follow, so the connection can be reused.
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			return ex, nil
		}
		// Event types this client does not know are skipped: the server may
		// add some.
	}
}

// chunkTail keeps a stream's chunks in Execution: all of them without a
// callback; with one, the last OutputCap bytes (none with discard).
type chunkTail struct {
	chunks *[]string
	n      int // bytes in *chunks
}

func (t *chunkTail) add(text string, callback func(string), discard bool) {
	if callback != nil {
		callback(text)
		if discard {
			return
		}
	}
	*t.chunks = append(*t.chunks, text)
	t.n += len(text)
	if callback == nil {
		return
	}
	c := *t.chunks
	for t.n > OutputCap {
		if over := t.n - OutputCap; over < len(c[0]) {
			c[0] = cutHead(c[0], over)
			t.n -= over
			break
		}
		t.n -= len(c[0])
		c[0] = "" // let the dropped chunk go
		c = c[1:]
	}
	*t.chunks = c
}

// cutHead drops the first n bytes of s, and the rest of a UTF-8 sequence
// cut there.
func cutHead(s string, n int) string {
	s = s[n:]
	for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}

// CreateContext makes a new context, a kernel with its own state, in
// sandbox id.
func (c *Client) CreateContext(ctx context.Context, id string, req api.CreateContextRequest) (*api.CodeContext, error) {
	p, err := sandboxPath(id, "/contexts")
	if err != nil {
		return nil, err
	}
	var cc api.CodeContext
	if err := c.doJSON(ctx, http.MethodPost, p, nil, req, &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// ListContexts returns the contexts of sandbox id; the default context is
// among them once a cell has made it.
func (c *Client) ListContexts(ctx context.Context, id string) ([]api.CodeContext, error) {
	p, err := sandboxPath(id, "/contexts")
	if err != nil {
		return nil, err
	}
	var l api.CodeContextList
	if err := c.doJSON(ctx, http.MethodGet, p, nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Contexts, nil
}

// RestartContext gives context cid of sandbox id a new kernel: its state
// is lost, its id, cwd and env stay.
func (c *Client) RestartContext(ctx context.Context, id, cid string) (*api.CodeContext, error) {
	p, err := contextPath(id, cid, "/restart")
	if err != nil {
		return nil, err
	}
	var cc api.CodeContext
	if err := c.doJSON(ctx, http.MethodPost, p, nil, nil, &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// RemoveContext removes context cid of sandbox id and kills its kernel.
func (c *Client) RemoveContext(ctx context.Context, id, cid string) error {
	p, err := contextPath(id, cid, "")
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, p, nil, nil, nil)
}

func contextPath(id, cid, suffix string) (string, error) {
	if cid == "" {
		return "", errors.New("empty context id")
	}
	return sandboxPath(id, "/contexts/"+url.PathEscape(cid)+suffix)
}
