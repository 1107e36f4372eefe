package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
)

// WithListenerOwner makes every connection the client opens go only to a
// socket that user uid listens on, as the kernel's socket table says just
// before and just after connecting (the same socket both times, so the
// connection reached it); otherwise the call fails with an *APIError of
// code forbidden naming who listens there, and nothing is sent. The base
// URL's host must be an IP address, the client's Transport an
// *http.Transport (or none), and the check needs Linux's /proc/net/tcp.
//
// New sets it by itself when it sends the local daemon's admin key (see
// LocalKey), to the key file's owner.
func WithListenerOwner(uid int) Option {
	return func(c *Client) { c.listenerOwner = &uid }
}

// guardLocal runs at the end of New: with no key set and the default
// address it takes the local daemon's admin key, and wherever a listener's
// owner is to be checked it wraps the HTTP client's dialer with the check.
// A local key whose listener cannot be checked (not Linux, or an HTTP
// client this cannot wrap) is not sent at all.
func (c *Client) guardLocal() error {
	local := false
	if c.apiKey == "" && !c.keySet && c.listenerOwner == nil && c.baseURL == localBaseURL && canCheckListeners() {
		if key, owner, err := ReadLocalKey(); err == nil && key != "" {
			c.apiKey, c.listenerOwner, local = key, &owner, true
		}
	}
	if c.listenerOwner == nil {
		return nil
	}
	hc, err := guardedHTTPClient(c.httpClient, c.baseURL, *c.listenerOwner)
	if err != nil && local {
		c.apiKey, c.listenerOwner = "", nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("WithListenerOwner: %w", err)
	}
	c.httpClient = hc
	return nil
}

// canCheckListeners says whether the kernel's socket table can be read.
func canCheckListeners() bool {
	_, err := os.Stat("/proc/net/tcp")
	return err == nil
}

// guardedHTTPClient returns a copy of hc whose connections to base's
// address are checked to reach a listener of uid.
func guardedHTTPClient(hc *http.Client, base string, uid int) (*http.Client, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if net.ParseIP(u.Hostname()) == nil {
		return nil, fmt.Errorf("%s: the host must be an IP address for its listener to be checked", base)
	}
	target := net.JoinHostPort(u.Hostname(), port)

	var tr *http.Transport
	switch t := hc.Transport.(type) {
	case nil:
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			tr = dt.Clone()
		} else {
			tr = &http.Transport{}
		}
	case *http.Transport:
		tr = t.Clone()
	default:
		return nil, fmt.Errorf("the HTTP client's Transport is a %T, not an *http.Transport whose connections can be checked", t)
	}
	if tr.DialTLSContext != nil || tr.DialTLS != nil {
		return nil, errors.New("the HTTP client's Transport dials TLS itself; its connections cannot be checked")
	}
	next := tr.DialContext
	if next == nil && tr.Dial != nil {
		dial := tr.Dial
		next = func(_ context.Context, network, addr string) (net.Conn, error) { return dial(network, addr) }
	}
	if next == nil {
		next = (&net.Dialer{}).DialContext
	}
	tr.Dial = nil
	tr.Proxy = nil // the key goes to the checked listener, not through a proxy
	tr.DialContext = checkedDial(next, target, uid)
	cp := *hc
	cp.Transport = tr
	return &cp, nil
}

// checkedDial wraps next: a connection is made only to target, only when
// every socket listening there belongs to uid, and kept only when one of
// those same sockets still listens once connected (no other user's socket
// can listen on the port beside it, so the connection reached it).
func checkedDial(next func(context.Context, string, string) (net.Conn, error), target string, uid int) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !sameAddr(addr, target) {
			return nil, fmt.Errorf("refusing to connect to %s: only %s's listener is checked", addr, target)
		}
		before, err := ownedListeners(target, uid)
		if err != nil {
			return nil, err
		}
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		after, err := ownedListeners(target, uid)
		if err == nil && !overlap(before, after) {
			err = &APIError{Code: CodeForbidden, Status: http.StatusForbidden, Message: fmt.Sprintf(
				"the socket listening on %s changed while connecting; refusing to send it the local admin key", target)}
		}
		if errors.Is(err, errNothingListens) {
			err = fmt.Errorf("the listener on %s went away while connecting: %w", target, err)
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
}

// sameAddr says whether host:port a and b name the same IP and port.
func sameAddr(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	return err1 == nil && err2 == nil && ap == bp && net.ParseIP(ah) != nil && net.ParseIP(ah).Equal(net.ParseIP(bh))
}

func overlap(a, b map[uint64]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}
