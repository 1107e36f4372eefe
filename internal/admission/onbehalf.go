package admission

import (
	"context"
	"net/http"
)

// A handler that serves its requests by calling the API in-process (the
// E2B layer: OnBehalf's API under Started's handler) is, for the
// Listener it is served on, what the API is for its own: once the API
// has accepted the key of an in-process request made for one of its
// requests, that request's connection is spared under the key's account
// until its handler returns, exactly as a direct request's
// (RequestAuthorized), so that keyless clients cannot evict it. And
// since its in-process requests have no connection of their own, they
// are counted by account (AccountSlots), each account within the
// Listener's per-account share, as MCP's tool calls are.

// outerRequest is a request served by Started on a Listener's conn c.
type outerRequest struct {
	c     *conn
	ended bool // its handler returned; guarded by c.l.mu
}

type outerKey struct{}

// end notes that o's handler returned: in-process requests still made
// for it (by goroutines that outlive it) no longer spare its connection.
func (o *outerRequest) end() {
	o.c.l.mu.Lock()
	o.ended = true
	o.c.l.mu.Unlock()
}

// behalf is an in-process request made through OnBehalf.
type behalf struct {
	outer   *outerRequest // nil when made outside Started's requests
	slots   *AccountSlots
	account string // whose slot it holds, when held
	held    bool
}

type behalfKey struct{}

// OnBehalf is api (the API's handler) for in-process requests made, with
// their context, for the requests of a handler served by Started (the E2B
// layer's). Like InProcess, it hides the outer request's connection from
// api; unlike it, the key api accepts spares that connection, and each
// account has at most its share of such requests in progress at once.
func OnBehalf(api http.Handler) http.Handler {
	slots := &AccountSlots{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, _ := r.Context().Value(outerKey{}).(*outerRequest)
		d := &behalf{outer: o, slots: slots}
		defer d.release()
		api.ServeHTTP(w, r.WithContext(hideConn(r.Context(), d)))
	})
}

// hideConn is ctx for an in-process request: without the caller's
// connection (a typed nil, which the caller's own request holds and
// watches), nor its outer request, and with d (nil: none).
func hideConn(ctx context.Context, d *behalf) context.Context {
	ctx = context.WithValue(ctx, connKey{}, (*conn)(nil))
	ctx = context.WithValue(ctx, outerKey{}, (*outerRequest)(nil))
	return context.WithValue(ctx, behalfKey{}, d)
}

// authorized is RequestAuthorized for d, whose key was accepted for
// account: it takes one of account's slots, then spares the outer
// request's connection, or refuses as the Listener refuses a direct
// request.
func (d *behalf) authorized(w http.ResponseWriter, account string) error {
	if d.held {
		return nil
	}
	share := defaultPerAccount(DefaultMaxConns)
	var l *Listener
	if d.outer != nil {
		l = d.outer.c.l
		share = l.perAccount
	}
	err := TooManyInProgress(share)
	if d.slots.Take(account, share) {
		d.account, d.held = account, true
		if l == nil {
			return nil
		}
		if err = l.spareFor(d.outer, account); err == nil {
			return nil
		}
		d.release()
	}
	w.Header().Set("Retry-After", "1")
	if l != nil {
		l.shed(&l.busy)
	}
	return err
}

// release gives back d's slot, if it holds one.
func (d *behalf) release() {
	if d.held {
		d.held = false
		d.slots.Give(d.account)
	}
}

// InProcess is h for requests made in-process (package selfcall): the
// request has no connection of its own, and a typed nil hides the
// caller's, which the caller's own request already holds and watches.
func InProcess(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(hideConn(r.Context(), nil)))
	})
}
