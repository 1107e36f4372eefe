package admission

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// A request's body is read while its handler runs, when the header
// timeout no longer holds and net/http sets no deadline of its own: a
// body sent a byte a minute would keep its connection (for a key holder,
// a spared one) for as long as its client likes. So every read of the
// body gets a deadline, the Listener's BodyIdleTimeout from the moment the
// handler asks for more: a transfer that keeps moving goes through at any
// speed, one that stalls ends the request with invalid_request. No read
// gets a deadline once the body has ended: net/http then reads on its own
// to notice the client leave, with no deadline, as long answers (exec
// streams, bounded by the lease) need. A body the handler left unread (a
// refused request) gets one deadline when the handler returns: net/http
// reads what remains of it before it answers, and would otherwise wait
// for a dribbling client as long as it dribbles.

// idleBody is a request body whose reads wait at most timeout each.
type idleBody struct {
	body    io.ReadCloser
	c       *conn
	timeout time.Duration
	// err is the first error read, returned ever after: once the body
	// has ended, the connection is net/http's again. over is set with it.
	err  error
	over atomic.Bool
	// ended is set when the handler has returned; stalled once a read
	// ran into the deadline.
	ended, stalled atomic.Bool
}

// errReadAfterEnd answers a read of a body whose handler returned.
var errReadAfterEnd = errors.New("request body read after its handler returned")

func (b *idleBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.ended.Load() {
		return 0, errReadAfterEnd
	}
	b.c.Conn.SetReadDeadline(time.Now().Add(b.timeout))
	n, err := b.body.Read(p)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			b.stalled.Store(true)
			err = b.stalledError()
		}
		b.err = err
		b.over.Store(true)
	}
	return n, err
}

func (b *idleBody) Close() error { return b.body.Close() }

func (b *idleBody) stalledError() error {
	return sandbox.Errorf(sandbox.KindInvalid,
		"request body stalled: nothing arrived for %s; a body must keep moving until it ends", b.timeout)
}

// watchBody bounds the idle time of r's body, read over c: r must be a
// copy of the request net/http made, which must keep its own body. It
// returns what the end of the request's handler calls.
func (c *conn) watchBody(r *http.Request) (end func()) {
	if r.Body == nil || r.Body == http.NoBody {
		c.body.Store(nil)
		return func() {}
	}
	b := &idleBody{body: r.Body, c: c, timeout: c.l.bodyIdle}
	r.Body = b
	c.body.Store(b)
	return func() {
		b.ended.Store(true)
		if !b.over.Load() {
			c.Conn.SetReadDeadline(time.Now().Add(b.timeout))
		}
	}
}

// StalledBody is the error of the body of the request of ctx when it
// stalled, else nil: the answer to give whatever else its reader made of it.
func StalledBody(ctx context.Context) error {
	c, _ := ctx.Value(connKey{}).(*conn)
	if c == nil {
		return nil
	}
	if b := c.body.Load(); b != nil && b.stalled.Load() {
		return b.stalledError()
	}
	return nil
}
