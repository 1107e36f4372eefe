package egress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/withruntime/withruntime/internal/backoff"
)

// Backoff of the accept and read loops after an error, as net/http's.
const (
	minRetryDelay = 5 * time.Millisecond
	maxRetryDelay = time.Second
)

// retrier is the backoff of one serving loop: every error but a closed
// socket or a done context is waited out and retried, since the errors a
// loaded host gives (EMFILE, ENFILE, ENOBUFS, ENOMEM) pass, and a loop that
// returned on one would leave every sandbox without egress for good.
type retrier struct {
	ctx   context.Context
	log   *slog.Logger
	what  string
	delay time.Duration
}

// again reports whether the loop goes on after err, having waited; false
// means the socket was closed or ctx is done, and the loop ends.
func (r *retrier) again(err error) bool {
	if r.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return false
	}
	r.delay = backoff.Next(r.delay, minRetryDelay, maxRetryDelay)
	r.log.Warn("egress: retrying after an error", "loop", r.what, "err", err, "delay", r.delay)
	t := time.NewTimer(r.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// ok resets the backoff after a success.
func (r *retrier) ok() { r.delay = 0 }
