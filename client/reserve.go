package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// ReserveFunc reserves n bytes of memory the client is about to hold of an
// answer about sandbox id ("" for an answer about no one sandbox), or
// refuses; release gives them back. A program that holds the answers of
// others' sandboxes in its own memory (the server's MCP tools and E2B
// layer, which call the API in-process) sets one to bound their sum; the
// refusal is the call's error, returned as it is.
type ReserveFunc func(ctx context.Context, sandboxID string, n int64) (release func(), err error)

// WithReserve makes the client reserve, through fn, the memory of every
// answer it reads whole (a JSON body, an event line) before it holds it.
func WithReserve(fn ReserveFunc) Option {
	return func(c *Client) { c.reserve = fn }
}

// Reserving returns a copy of c that reserves through fn (WithReserve).
func (c *Client) Reserving(fn ReserveFunc) *Client {
	cp := *c
	cp.reserve = fn
	return &cp
}

// Reserve reserves n bytes about sandbox id through the client's
// ReserveFunc, for what a caller keeps of an answer past the call (a
// cell's images); without one it reserves nothing.
func (c *Client) Reserve(ctx context.Context, id string, n int64) (release func(), err error) {
	if c.reserve == nil || n <= 0 {
		return func() {}, nil
	}
	return c.reserve(ctx, id, n)
}

// Answer bounds by route: a file's description is a few names and numbers
// (a name, a path and a link target of at most 4 KiB each, escaped), so
// one over maxInfoBody is no answer of a real agent.
const maxInfoBody = 64 << 10

// jsonHoldFactor is what a JSON answer costs per byte while it is read
// and decoded: the bytes, and the value decoded from them (a listing of
// short names decodes to about twice its bytes).
const jsonHoldFactor = 3

// errAnswerTooLarge is the cause of a TransportError for an answer over
// its route's bound.
var errAnswerTooLarge = errors.New("answer too large")

// answerBody is a 2xx answer's body with what holding it takes: the
// client's ReserveFunc, the sandbox the answer is about, and the most
// bytes the route's answer may have (0: maxJSONBody). The readers of
// whole answers and event lines find it by its type.
type answerBody struct {
	io.ReadCloser
	ctx     context.Context
	sandbox string
	reserve ReserveFunc
	max     int64
	closers []func() // run once at Close: reservations held until then
}

// onClose runs f when the body is closed.
func (a *answerBody) onClose(f func()) { a.closers = append(a.closers, f) }

func (a *answerBody) Close() error {
	err := a.ReadCloser.Close()
	for _, f := range a.closers {
		f()
	}
	a.closers = nil
	return err
}

// hold reserves n bytes through the body's ReserveFunc, if any; a
// refusal is a *refusal.
func (a *answerBody) hold(n int64) (func(), error) {
	if a == nil || a.reserve == nil || n <= 0 {
		return func() {}, nil
	}
	release, err := a.reserve(a.ctx, a.sandbox, n)
	if err != nil {
		return nil, &refusal{err}
	}
	return release, nil
}

// refusal is a ReserveFunc's error, kept apart from read errors: the call
// returns it as it is, not as a transport failure.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// callError is err as a call's error: a refusal's own error, any other a
// *TransportError of op.
func callError(ctx context.Context, op string, err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return r.err
	}
	return transportError(ctx, op, err)
}

// sandboxOfPath is the sandbox id a request path names, or "".
func sandboxOfPath(p string) string {
	rest, ok := strings.CutPrefix(p, api.Version+"/sandboxes/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	if u, err := url.PathUnescape(id); err == nil {
		return u
	}
	return id
}

// readAnswer reads a whole answer of at most limit bytes (size, when not
// negative, is its announced length), reserving jsonHoldFactor times its
// buffer as the buffer grows (while a buffer grows, the old one is held
// too). release gives the reservation back once the caller no longer
// holds the bytes nor what it decodes from them.
func readAnswer(a *answerBody, r io.Reader, size, limit int64) (b []byte, release func(), err error) {
	release = func() {}
	fail := func(err error) ([]byte, func(), error) {
		release()
		return nil, func() {}, err
	}
	if size > limit {
		return fail(fmt.Errorf("%w: %d bytes announced, the bound is %d", errAnswerTooLarge, size, limit))
	}
	next := int64(512)
	if size >= 0 {
		// The transport ends the body at its announced length: a buffer
		// of that size is the last one.
		next, limit = size, size
	}
	for {
		if len(b) == cap(b) {
			if int64(len(b)) == limit {
				// Full: one byte more is an answer over the bound.
				var one [1]byte
				k, err := io.ReadFull(r, one[:])
				switch {
				case k > 0:
					return fail(fmt.Errorf("%w: more than %d bytes", errAnswerTooLarge, limit))
				case errors.Is(err, io.EOF):
					return b, release, nil
				default:
					return fail(err)
				}
			}
			n := min(max(next, 2*int64(cap(b))), limit)
			rel, err := a.hold(jsonHoldFactor * n)
			if err != nil {
				return fail(err)
			}
			nb := make([]byte, len(b), n)
			copy(nb, b)
			b = nb
			release() // the old buffer's: it is garbage now
			release = rel
		}
		k, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+k]
		if errors.Is(err, io.EOF) {
			return b, release, nil
		}
		if err != nil {
			return fail(err)
		}
	}
}
