package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// Preview URLs: HTTP to a port a sandbox listens on, by path
// (/v1/sandboxes/{id}/ports/{port}/...) on the API's listener, or by host
// name ({port}-{id}.{domain}) on the preview listener. The request goes
// to the sandbox's loopback through its agent (service.Ports.DialPort):
// the host reaches the port, never the sandbox the host.
//
// What a sandbox answers is untrusted: its headers are bounded, its
// cookies are kept to its own preview (no Domain, and under its path in
// the path form), it cannot redirect elsewhere, and the headers that
// would act on the whole host (HSTS, Alt-Svc, Clear-Site-Data) are
// dropped. In the path form its pages are served from the API's origin,
// so they get a sandboxing Content-Security-Policy: an opaque origin that
// can neither script the API's origin nor read another preview. Apps that
// need an origin of their own (cookies, storage, workers) use the host
// form.

// Bounds of the previews.
const (
	// maxPreviewConnsPerSandbox and maxPreviewConnsPerAccount bound the
	// proxied requests (WebSockets included) in flight at once.
	maxPreviewConnsPerSandbox = 256
	maxPreviewConnsPerAccount = 1024
	// previewHeaderWait bounds how long a sandbox takes to start its
	// answer (a dev server's first build may be slow).
	previewHeaderWait = 2 * time.Minute
	// previewIdle closes a proxied connection on which nothing moved for
	// that long, either way.
	previewIdle = 10 * time.Minute
	// previewMaxHeaderBytes bounds a sandbox's answer's headers.
	previewMaxHeaderBytes = 64 << 10
	// previewCookie carries a signed URL's token on later requests.
	previewCookie = "withruntime_preview"
)

// previewTarget is what a request to a preview names.
type previewTarget struct {
	id   string
	port int
	// prefix is the path form's path up to the port ("" in the host
	// form): it is cut from the path the sandbox sees.
	prefix string
}

// previewCounts counts the proxied requests in flight per sandbox and per
// account.
type previewCounts struct {
	mu        sync.Mutex
	sandboxes map[string]int
	accounts  map[string]int
}

func (p *previewCounts) acquire(account, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sandboxes == nil {
		p.sandboxes, p.accounts = map[string]int{}, map[string]int{}
	}
	if p.sandboxes[id] >= maxPreviewConnsPerSandbox {
		return sandbox.Errorf(sandbox.KindRateLimited, "%d requests to the previews of sandbox %s are in flight, the most there may be", maxPreviewConnsPerSandbox, id)
	}
	if p.accounts[account] >= maxPreviewConnsPerAccount {
		return sandbox.Errorf(sandbox.KindRateLimited, "%d requests to the previews of this account's sandboxes are in flight, the most there may be", maxPreviewConnsPerAccount)
	}
	p.sandboxes[id]++
	p.accounts[account]++
	return nil
}

func (p *previewCounts) release(account, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sandboxes[id]--; p.sandboxes[id] <= 0 {
		delete(p.sandboxes, id)
	}
	if p.accounts[account]--; p.accounts[account] <= 0 {
		delete(p.accounts, account)
	}
}

// ports is the service's port access, or a not_supported error.
func (s *server) ports() (service.Ports, error) {
	p, ok := s.cfg.Sandboxes.(service.Ports)
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "this server does not serve preview URLs or port forwards")
	}
	return p, nil
}

// parsePort reads a port number of a path.
func parsePort(v string) (int, error) {
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != v {
		return 0, sandbox.Errorf(sandbox.KindInvalid, "port must be 1 to 65535, not %q", v)
	}
	return p, nil
}

// previewByPath serves the path form, /v1/sandboxes/{id}/ports/{port}/...
func (s *server) previewByPath(w http.ResponseWriter, r *http.Request) {
	info := infoFrom(r.Context())
	info.sandboxID = r.PathValue("id")
	port, err := parsePort(r.PathValue("port"))
	if err == nil && strings.IndexByte(r.PathValue("id"), 0) >= 0 {
		err = sandbox.Errorf(sandbox.KindInvalid, "id contains a NUL byte")
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	prefix := sandboxesPath + "/" + r.PathValue("id") + "/ports/" + r.PathValue("port")
	s.servePreview(w, r, previewTarget{id: r.PathValue("id"), port: port, prefix: prefix})
}

const sandboxesPath = api.Version + "/sandboxes"

// servePreview authorizes a request to a preview and proxies it.
func (s *server) servePreview(w http.ResponseWriter, r *http.Request, t previewTarget) {
	infoFrom(r.Context()).route = "preview"
	if err := s.proxyPreview(w, r, t); err != nil {
		writeError(w, r, err)
	}
}

func (s *server) proxyPreview(w http.ResponseWriter, r *http.Request, t previewTarget) error {
	ports, err := s.ports()
	if err != nil {
		return err
	}
	// A signed URL: its token becomes a cookie, and the browser comes back
	// without it, so that the token leaves the address bar and the
	// sandbox never sees it.
	if tok := r.URL.Query().Get(api.PreviewTokenParam); tok != "" {
		// A revoked token sets no cookie: the URL is dead, and says so
		// here rather than after a redirect.
		c, _, err := s.tokenRecord(r.Context(), t, tok, sandbox.Errorf(sandbox.KindUnauthorized, "%v", errPreviewToken))
		if err != nil {
			return err
		}
		path := "/"
		if t.prefix != "" {
			path = t.prefix + "/"
		}
		http.SetCookie(w, &http.Cookie{
			Name: previewCookie, Value: tok, Path: path, Expires: c.expires,
			HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
		})
		q := r.URL.Query()
		q.Del(api.PreviewTokenParam)
		back := *r.URL
		back.RawQuery = q.Encode()
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, back.RequestURI(), http.StatusSeeOther)
		return nil
	}
	rec, err := s.previewCaller(r, ports, t)
	if err != nil {
		return err
	}
	info := infoFrom(r.Context())
	info.account = rec.Account
	if err := s.previews.acquire(rec.Account, t.id); err != nil {
		return err
	}
	defer s.previews.release(rec.Account, t.id)
	conn, err := ports.DialPort(r.Context(), rec.Account, t.id, t.port)
	if err != nil {
		return err
	}
	s.reverseProxy(r, t, newIdleConn(conn, previewIdle)).ServeHTTP(w, r)
	return nil
}

// previewCaller decides whether r may reach the preview, and returns the
// sandbox's record. A key of the sandbox's account, a token for the
// sandbox and port (header or cookie), or the port being public lets it
// in; every other case is the same 401, whether or not the sandbox exists.
func (s *server) previewCaller(r *http.Request, ports service.Ports, t previewTarget) (*sandbox.Record, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		c, err := s.authenticate(r, Route{})
		if err != nil {
			return nil, err
		}
		if err := admission.RequestAuthorized(r.Context(), nil, c.account); err != nil {
			return nil, err
		}
		return s.cfg.Sandboxes.Get(r.Context(), c.account, t.id)
	}
	denied := sandbox.Errorf(sandbox.KindUnauthorized, "this preview is private: send an API key (Authorization: Bearer KEY) or a preview token (%s), or open a signed URL", api.PreviewTokenHeader)
	tok, fromCookie := r.Header.Get(api.PreviewTokenHeader), false
	if tok == "" {
		if ck, err := r.Cookie(previewCookie); err == nil {
			tok, fromCookie = ck.Value, true
		}
	}
	if tok != "" && !(fromCookie && crossSite(r)) {
		_, rec, err := s.tokenRecord(r.Context(), t, tok, denied)
		return rec, err
	}
	rec, err := ports.Lookup(r.Context(), t.id)
	if err != nil || !rec.Preview.IsPublic(t.port) {
		return nil, denied
	}
	return rec, nil
}

// tokenRecord opens tok, a preview token for t, and returns its claims
// and the sandbox's record; denied when the token is not for t's sandbox
// and port, has expired, or was made before the sandbox's last revoke.
func (s *server) tokenRecord(ctx context.Context, t previewTarget, tok string, denied error) (previewClaims, *sandbox.Record, error) {
	c, err := s.previewTokens.open(t.id, tok, s.now())
	if err != nil || (c.port != 0 && c.port != t.port) {
		return previewClaims{}, nil, denied
	}
	rec, err := s.cfg.Sandboxes.Get(ctx, c.account, t.id)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return previewClaims{}, nil, denied
	}
	if err != nil {
		return previewClaims{}, nil, err
	}
	if rec.Preview != nil && rec.Preview.Generation != c.generation || rec.Preview == nil && c.generation != 0 {
		return previewClaims{}, nil, denied
	}
	return c, rec, nil
}

// crossSite says whether a request came from another site's page (or
// another preview's, which is the same site): a cookie does not authorize
// it, except for a top-level navigation that cannot change anything.
// Browsers too old to say are taken at their word.
func crossSite(r *http.Request) bool {
	// A WebSocket's handshake carries no Sec-Fetch-Site (Chromium sends
	// none), but always an Origin. Under a preview domain that is not a
	// public suffix, another preview's page (another account's, made
	// public) is the same site, so the browser sends this preview's
	// SameSite=Lax cookie with its handshake: only the preview's own
	// origin gets the cookie's authority. (An opaque origin, a sandboxed
	// page's, sends "null".)
	if o := r.Header.Get("Origin"); o != "" && !originIsHost(o, r.Host) {
		return true
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return false
	}
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	return !(safe && r.Header.Get("Sec-Fetch-Mode") == "navigate")
}

// originIsHost says whether origin, an Origin header's scheme://host[:port],
// names host (a request's Host).
func originIsHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.Path == "" && u.User == nil && strings.EqualFold(u.Host, host)
}

// reverseProxy is the proxy of one request, over conn (already joined to
// the sandbox's port).
func (s *server) reverseProxy(in *http.Request, t previewTarget, conn net.Conn) *httputil.ReverseProxy {
	var once sync.Once
	transport := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			var c net.Conn
			once.Do(func() { c = conn })
			if c == nil {
				return nil, errors.New("the preview's connection was used already")
			}
			return c, nil
		},
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: previewMaxHeaderBytes,
		ResponseHeaderTimeout:  previewHeaderWait,
		ExpectContinueTimeout:  time.Second,
	}
	host := in.Host
	return &httputil.ReverseProxy{
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      s.proxyLog,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded()
			out := pr.Out
			out.URL = &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(t.port))}
			out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, t.prefix)
			if pr.In.URL.RawPath != "" {
				out.URL.RawPath = strings.TrimPrefix(pr.In.URL.RawPath, t.prefix)
			}
			if out.URL.Path == "" {
				out.URL.Path, out.URL.RawPath = "/", ""
			}
			q := pr.In.URL.Query()
			if q.Has(api.PreviewTokenParam) {
				q.Del(api.PreviewTokenParam)
				out.URL.RawQuery = q.Encode()
			} else {
				out.URL.RawQuery = pr.In.URL.RawQuery
			}
			if t.prefix != "" {
				// The API's host name means nothing to the app; dev
				// servers that check the host accept their own.
				out.Host = out.URL.Host
				out.Header.Set("X-Forwarded-Prefix", t.prefix)
			} else {
				out.Host = host
			}
			// The platform's credentials never enter a sandbox.
			for _, h := range []string{"Authorization", "Proxy-Authorization", api.PreviewTokenHeader} {
				out.Header.Del(h)
			}
			dropCookie(out.Header, previewCookie)
		},
		ModifyResponse: func(resp *http.Response) error {
			return tamePreviewAnswer(resp, host, t)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if sandbox.KindOf(err) == "" || sandbox.KindOf(err) == sandbox.KindInternal {
				err = sandbox.Errorf(sandbox.KindBadGateway, "the sandbox's server on port %d did not answer properly: %v", t.port, err)
			}
			writeError(w, r, err)
		},
	}
}

// dropCookie removes the cookie name from a request's Cookie headers.
func dropCookie(h http.Header, name string) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		var parts []string
		for _, p := range strings.Split(line, ";") {
			if k, _, _ := strings.Cut(strings.TrimSpace(p), "="); k != name {
				parts = append(parts, strings.TrimSpace(p))
			}
		}
		if len(parts) > 0 {
			keep = append(keep, strings.Join(parts, "; "))
		}
	}
	h.Del("Cookie")
	for _, v := range keep {
		h.Add("Cookie", v)
	}
}

// previewCSP makes a path-form page an opaque origin (see the top).
const previewCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads allow-popups-to-escape-sandbox"

// tamePreviewAnswer keeps a sandbox's answer to its own preview.
func tamePreviewAnswer(resp *http.Response, host string, t previewTarget) error {
	h := resp.Header
	for _, k := range []string{"Strict-Transport-Security", "Alt-Svc", "Clear-Site-Data", "Public-Key-Pins"} {
		h.Del(k)
	}
	if t.prefix != "" {
		h.Add("Content-Security-Policy", previewCSP)
	}
	cookies := h.Values("Set-Cookie")
	h.Del("Set-Cookie")
	for _, line := range cookies {
		c, err := http.ParseSetCookie(line)
		if err != nil || c.Name == previewCookie {
			continue
		}
		c.Domain = ""
		if t.prefix != "" {
			c.Path = t.prefix + "/" + strings.TrimPrefix(c.Path, "/")
		}
		if v := c.String(); v != "" {
			h.Add("Set-Cookie", v)
		}
	}
	if loc := h.Get("Location"); loc != "" {
		u, err := url.Parse(loc)
		if err != nil {
			return sandbox.Errorf(sandbox.KindBadGateway, "the sandbox redirected to an address that does not parse")
		}
		switch {
		case u.Host != "" && !strings.EqualFold(u.Host, host):
			return sandbox.Errorf(sandbox.KindBadGateway, "the sandbox redirected to another host (%s): a preview stays on its own", u.Host)
		case u.Host == "" && strings.HasPrefix(u.Path, "/") && t.prefix != "":
			u.Path = t.prefix + u.Path
			u.RawPath = ""
			h.Set("Location", u.String())
		}
	}
	return nil
}

// idleConn closes a connection on which nothing moved for idle.
type idleConn struct {
	net.Conn
	idle  time.Duration
	timer *time.Timer
}

func newIdleConn(c net.Conn, idle time.Duration) *idleConn {
	ic := &idleConn{Conn: c, idle: idle}
	ic.timer = time.AfterFunc(idle, func() { c.Close() })
	return ic
}

func (c *idleConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.timer.Reset(c.idle)
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.timer.Reset(c.idle)
	return n, err
}

func (c *idleConn) Close() error {
	c.timer.Stop()
	return c.Conn.Close()
}
