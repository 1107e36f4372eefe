package admission

import (
	"context"
	"net/http"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// A request whose key was accepted is in progress until its handler
// returns (an exec stream, a file transfer), and its connection is spared
// from eviction meanwhile. Spared connections are what a key holder could
// pin the API with, so they are bounded twice: one account holds at most
// MaxPerAccount of them (a quarter of the connections by default), and all
// accounts together leave a reserve of slots (a sixteenth) that only
// evictable connections take. Whatever key holders do, a new client (a
// health check, another account) finds a slot it may take.

// defaultPerAccount is how many spared connections one account holds
// unless configured otherwise.
func defaultPerAccount(maxConns int) int { return max(1, maxConns/4) }

// Share is an account's share of requests in progress on the Listener the
// request of ctx came over: its MaxPerAccount, or the default share of
// DefaultMaxConns for a request that came over none.
func Share(ctx context.Context) int {
	if c, _ := ctx.Value(connKey{}).(*conn); c != nil {
		return c.l.perAccount
	}
	return defaultPerAccount(DefaultMaxConns)
}

// reserveOf is how many of maxConns slots are never spared: at least one,
// so that "every slot spared" cannot happen; none only when there is a
// single slot to give.
func reserveOf(maxConns int) int {
	if maxConns < 2 {
		return 0
	}
	return max(1, maxConns/16)
}

// RequestAuthorized spares the connection of a request whose key was
// accepted for account from eviction until its handler returns. It
// answers an error instead, with a Retry-After on w, when the account
// already holds its share or every slot outside the reserve is spared:
// the request is then to be refused (the error says why, as a
// sandbox.Kind) and its connection stays evictable.
func RequestAuthorized(ctx context.Context, w http.ResponseWriter, account string) error {
	c, _ := ctx.Value(connKey{}).(*conn)
	if c == nil {
		if d, _ := ctx.Value(behalfKey{}).(*behalf); d != nil {
			return d.authorized(w, account) // made in-process (onbehalf.go)
		}
		return nil
	}
	err := c.l.spare(c, account)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		c.l.shed(&c.l.busy)
	}
	return err
}

// spare takes one of account's spared connections for c.
func (l *Listener) spare(c *conn, account string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spareLocked(c, account)
}

// spareFor spares the connection of o for account while o's handler
// runs.
func (l *Listener) spareFor(o *outerRequest, account string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o.ended {
		return nil
	}
	return l.spareLocked(o.c, account)
}

func (l *Listener) spareLocked(c *conn, account string) error {
	switch {
	case c.gone || c.account != nil:
		return nil // closed already, or spared already
	case l.byAccount[account] >= l.perAccount:
		return TooManyInProgress(l.perAccount)
	case l.spared >= l.max-l.reserve:
		return sandbox.Errorf(sandbox.KindCapacityExhausted, "the API has too many requests in progress: try again shortly")
	}
	c.account = &account
	l.byAccount[account]++
	l.spared++
	if c.elem != nil {
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
	return nil
}

// unspareLocked gives back c's spared connection, if it holds one.
func (l *Listener) unspareLocked(c *conn) {
	if c.account == nil {
		return
	}
	a := *c.account
	c.account = nil
	l.spared--
	if l.byAccount[a]--; l.byAccount[a] <= 0 {
		delete(l.byAccount, a)
	}
}
