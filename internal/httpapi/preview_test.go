package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// The preview proxy's unit tier: the sandbox's port is a test server the
// fake dials directly (fakeports_test.go); test/e2e reaches real ports
// inside gVisor through the agent.

// previewApp is what the test's "sandbox" serves on its port.
type previewApp struct {
	srv *httptest.Server
	// sse lets /sse's stream end.
	sse chan struct{}
}

// seen is what the app saw of a request (GET /echo).
type seen struct {
	Path, Query, Host string
	Header            http.Header
}

func newPreviewApp(t *testing.T) *previewApp {
	a := &previewApp{sse: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, seen{Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host, Header: r.Header})
	})
	mux.HandleFunc("/cookies", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "app=1; Domain=example.test; Path=/admin; HttpOnly")
		w.Header().Add("Set-Cookie", previewCookie+"=forged; Path=/")
		w.Header().Set("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
		w.Header().Set("Clear-Site-Data", `"*"`)
		w.Header().Set("Alt-Svc", `h3=":443"`)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://evil.example.test/steal", http.StatusFound)
	})
	mux.HandleFunc("/local", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/next?x=1", http.StatusFound)
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-a.sse
		io.WriteString(w, "data: last\n\n")
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		select {
		case <-a.sse:
		default:
			close(a.sse)
		}
		a.srv.Close()
	})
	return a
}

// previewEnv is an env whose sandboxes' port 8000 is a previewApp.
func previewEnv(t *testing.T) (*testEnv, *previewApp) {
	t.Helper()
	return previewEnvWith(t, nil)
}

func previewEnvWith(t *testing.T, secret []byte) (*testEnv, *previewApp) {
	t.Helper()
	e := newEnv(t, func(c *Config) { c.PreviewDomain, c.PreviewPort, c.PreviewSecret = "preview.test", 8443, secret })
	app := newPreviewApp(t)
	e.fake.setPort(8000, app.srv.Listener.Addr().String())
	e.fake.add("sbx-2", "acct1", sandbox.StateRunning)
	e.fake.add("sbx-other", "acct2", sandbox.StateRunning)
	return e, app
}

// preview reads GET .../previews/{port} with the full key.
func (e *testEnv) preview(id string, port string) api.Preview {
	e.t.Helper()
	resp := e.do("GET", "/v1/sandboxes/"+id+"/previews/"+port, e.keys[store.KeyFull], nil)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET previews/%s: %d %v", port, resp.StatusCode, errorOf(e.t, resp))
	}
	var p api.Preview
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// get sends GET path with the given headers, following no redirect.
func (e *testEnv) get(path string, h map[string]string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), "GET", e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func wantPreviewStatus(t *testing.T, what string, resp *http.Response, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: got %d %s, want %d", what, resp.StatusCode, b, status)
	}
	if code != "" {
		if got := errorOf(t, resp).Code; got != code {
			t.Errorf("%s: code %q, want %q", what, got, code)
		}
	}
}

func readSeen(t *testing.T, resp *http.Response) seen {
	t.Helper()
	var s seen
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPreviewAccess: who gets through to a private port, and what of
// their credentials reaches the sandbox (nothing).
func TestPreviewAccess(t *testing.T) {
	e, _ := previewEnv(t)
	const path = "/v1/sandboxes/sbx-1/ports/8000/echo/a%2Fb?x=1"

	wantPreviewStatus(t, "no credential", e.get(path, nil), 401, "unauthorized")
	wantPreviewStatus(t, "no credential, unknown sandbox", e.get("/v1/sandboxes/sbx-nope/ports/8000/echo/", nil), 401, "unauthorized")
	wantPreviewStatus(t, "another account's key", e.get(path, map[string]string{"Authorization": "Bearer " + e.keys[store.KeyAdmin]}), 404, "not_found")
	wantPreviewStatus(t, "a bad key", e.get(path, map[string]string{"Authorization": "Bearer wr_nope"}), 401, "unauthorized")

	for _, kind := range []store.KeyKind{store.KeyFull, store.KeyReadOnly} {
		resp := e.get(path, map[string]string{"Authorization": "Bearer " + e.keys[kind], "Cookie": "app=1; " + previewCookie + "=x"})
		wantPreviewStatus(t, string(kind)+" key", resp, 200, "")
		s := readSeen(t, resp)
		if s.Path != "/echo/a/b" || s.Query != "x=1" || s.Host != "127.0.0.1:8000" {
			t.Errorf("the app saw %s ?%s Host %s, want /echo/a/b ?x=1 Host 127.0.0.1:8000", s.Path, s.Query, s.Host)
		}
		if s.Header.Get("Authorization") != "" || s.Header.Get("Cookie") != "app=1" {
			t.Errorf("the app saw Authorization %q, Cookie %q: want none, and only its own cookie", s.Header.Get("Authorization"), s.Header.Get("Cookie"))
		}
		if s.Header.Get("X-Forwarded-Prefix") != "/v1/sandboxes/sbx-1/ports/8000" {
			t.Errorf("X-Forwarded-Prefix %q", s.Header.Get("X-Forwarded-Prefix"))
		}
	}

	p := e.preview("sbx-1", "8000")
	if p.Public || p.Token == "" || p.ExpiresAt == nil || p.Path != "/v1/sandboxes/sbx-1/ports/8000/" ||
		p.Host != "8000-sbx-1.preview.test:8443" || p.URL != "http://8000-sbx-1.preview.test:8443/" {
		t.Fatalf("preview: %+v", p)
	}
	if strings.Contains(p.Token, e.keys[store.KeyFull]) || !strings.HasPrefix(p.Token, previewTokenPrefix) {
		t.Errorf("token %q: want a preview token, never the key", p.Token)
	}
	resp := e.get(path, map[string]string{api.PreviewTokenHeader: p.Token})
	wantPreviewStatus(t, "token header", resp, 200, "")
	if s := readSeen(t, resp); s.Header.Get(api.PreviewTokenHeader) != "" {
		t.Errorf("the app saw the token header")
	}
	other := e.preview("sbx-2", "8000")
	wantPreviewStatus(t, "another sandbox's token", e.get(path, map[string]string{api.PreviewTokenHeader: other.Token}), 401, "unauthorized")
	port9 := e.preview("sbx-1", "9000")
	wantPreviewStatus(t, "another port's token", e.get(path, map[string]string{api.PreviewTokenHeader: port9.Token}), 401, "unauthorized")
	wantPreviewStatus(t, "a key as token", e.get(path, map[string]string{api.PreviewTokenHeader: e.keys[store.KeyFull]}), 401, "unauthorized")
	tampered := p.Token[:len(p.Token)-2] + "AA"
	wantPreviewStatus(t, "a tampered token", e.get(path, map[string]string{api.PreviewTokenHeader: tampered}), 401, "unauthorized")

	// A signed URL: 303 to the same URL without the token, and a cookie
	// for this preview's path only.
	resp = e.get(path+"&"+api.PreviewTokenParam+"="+url.QueryEscape(p.Token), nil)
	wantPreviewStatus(t, "signed URL", resp, http.StatusSeeOther, "")
	if loc := resp.Header.Get("Location"); loc != "/v1/sandboxes/sbx-1/ports/8000/echo/a%2Fb?x=1" {
		t.Errorf("Location %q", loc)
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == previewCookie {
			ck = c
		}
	}
	if ck == nil || ck.Value != p.Token || !ck.HttpOnly || ck.Path != "/v1/sandboxes/sbx-1/ports/8000/" || ck.Domain != "" {
		t.Fatalf("cookie %+v", ck)
	}
	cookie := previewCookie + "=" + p.Token
	resp = e.get(path, map[string]string{"Cookie": cookie})
	wantPreviewStatus(t, "cookie", resp, 200, "")
	if s := readSeen(t, resp); s.Header.Get("Cookie") != "" {
		t.Errorf("the app saw the preview cookie: %q", s.Header.Get("Cookie"))
	}
	// Another site's page (or another preview's) cannot use the cookie,
	// except for a top-level navigation.
	wantPreviewStatus(t, "cookie from another site", e.get(path, map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}), 401, "unauthorized")
	wantPreviewStatus(t, "cookie on a navigation", e.get(path, map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}), 200, "")
	wantPreviewStatus(t, "a bad signed URL", e.get(path+"&"+api.PreviewTokenParam+"=wrpt_nope", nil), 401, "unauthorized")

	// Revoked: the tokens made before stop working; new ones work.
	wantPreviewStatus(t, "revoke with a read-only key", e.do("POST", "/v1/sandboxes/sbx-1/previews/revoke", e.keys[store.KeyReadOnly], nil), 403, "forbidden")
	wantPreviewStatus(t, "revoke", e.do("POST", "/v1/sandboxes/sbx-1/previews/revoke", e.keys[store.KeyFull], nil), 200, "")
	wantPreviewStatus(t, "token after revoke", e.get(path, map[string]string{api.PreviewTokenHeader: p.Token}), 401, "unauthorized")
	wantPreviewStatus(t, "cookie after revoke", e.get(path, map[string]string{"Cookie": cookie}), 401, "unauthorized")
	wantPreviewStatus(t, "a new token", e.get(path, map[string]string{api.PreviewTokenHeader: e.preview("sbx-1", "8000").Token}), 200, "")

}

// TestPreviewTokenExpiry: a token opens until its expiry, for its sandbox
// only, and holds what it was made with.
func TestPreviewTokenExpiry(t *testing.T) {
	pt, err := newPreviewTokens(nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok := pt.seal("sbx-1", previewClaims{account: "acct1", port: 8000, generation: 3, expires: now.Add(time.Hour)})
	c, err := pt.open("sbx-1", tok, now)
	if err != nil || c.account != "acct1" || c.port != 8000 || c.generation != 3 {
		t.Fatalf("open: %+v, %v", c, err)
	}
	if _, err := pt.open("sbx-1", tok, now.Add(time.Hour)); err == nil {
		t.Error("a token opened at its expiry")
	}
	if _, err := pt.open("sbx-2", tok, now); err == nil {
		t.Error("a token opened for another sandbox")
	}
	other, _ := newPreviewTokens(nil)
	if _, err := other.open("sbx-1", tok, now); err == nil {
		t.Error("a token opened under another secret")
	}
}

// TestPreviewPublicAndStates: a public port needs nothing; a paused
// sandbox is a conflict, an ended one not found, a closed port 502.
func TestPreviewPublicAndStates(t *testing.T) {
	e, _ := previewEnv(t)
	const path = "/v1/sandboxes/sbx-1/ports/8000/echo/"
	wantPreviewStatus(t, "expose with a read-only key", e.doJSON("PUT", "/v1/sandboxes/sbx-1/previews/8000", e.keys[store.KeyReadOnly], `{"public":true}`), 403, "forbidden")
	wantPreviewStatus(t, "bad port", e.doJSON("PUT", "/v1/sandboxes/sbx-1/previews/0", e.keys[store.KeyFull], `{"public":true}`), 400, "invalid_request")
	wantPreviewStatus(t, "bad port", e.get("/v1/sandboxes/sbx-1/ports/65536/", nil), 400, "invalid_request")
	wantPreviewStatus(t, "bad expiry", e.do("GET", "/v1/sandboxes/sbx-1/previews/8000?expires_in=10", e.keys[store.KeyFull], nil), 400, "invalid_request")
	resp := e.doJSON("PUT", "/v1/sandboxes/sbx-1/previews/8000", e.keys[store.KeyFull], `{"public":true}`)
	wantPreviewStatus(t, "expose", resp, 200, "")
	var p api.Preview
	json.NewDecoder(resp.Body).Decode(&p)
	if !p.Public || p.Token != "" || p.ExpiresAt != nil {
		t.Errorf("a public preview: %+v", p)
	}
	wantPreviewStatus(t, "public, no credential", e.get(path, nil), 200, "")
	wantPreviewStatus(t, "another port stays private", e.get("/v1/sandboxes/sbx-1/ports/8001/", nil), 401, "unauthorized")
	wantPreviewStatus(t, "another sandbox stays private", e.get("/v1/sandboxes/sbx-2/ports/8000/echo/", nil), 401, "unauthorized")
	resp = e.do("GET", "/v1/sandboxes/sbx-1/previews", e.keys[store.KeyReadOnly], nil)
	var st api.PreviewSettings
	json.NewDecoder(resp.Body).Decode(&st)
	if len(st.PublicPorts) != 1 || st.PublicPorts[0] != 8000 {
		t.Errorf("settings: %+v", st)
	}
	wantPreviewStatus(t, "private again", e.doJSON("PUT", "/v1/sandboxes/sbx-1/previews/8000", e.keys[store.KeyFull], `{"public":false}`), 200, "")
	wantPreviewStatus(t, "private, no credential", e.get(path, nil), 401, "unauthorized")

	// Every port public (E2B's public traffic), then not.
	wantPreviewStatus(t, "all public, read-only key", e.doJSON("PUT", "/v1/sandboxes/sbx-1/previews", e.keys[store.KeyReadOnly], `{"all_public":true}`), 403, "forbidden")
	wantPreviewStatus(t, "all public", e.doJSON("PUT", "/v1/sandboxes/sbx-1/previews", e.keys[store.KeyFull], `{"all_public":true}`), 200, "")
	wantPreviewStatus(t, "all public, no credential", e.get(path, nil), 200, "")
	if p := e.preview("sbx-1", "8000"); !p.Public || p.Token != "" {
		t.Errorf("a port of an all-public sandbox: %+v", p)
	}
	wantPreviewStatus(t, "all public: another sandbox stays private", e.get("/v1/sandboxes/sbx-2/ports/8000/echo/", nil), 401, "unauthorized")
	wantPreviewStatus(t, "all public off", e.doJSON("PUT", "/v1/sandboxes/sbx-1/previews", e.keys[store.KeyFull], `{"all_public":false}`), 200, "")
	wantPreviewStatus(t, "all public off, no credential", e.get(path, nil), 401, "unauthorized")

	key := map[string]string{"Authorization": "Bearer " + e.keys[store.KeyFull]}
	wantPreviewStatus(t, "nothing listening", e.get("/v1/sandboxes/sbx-1/ports/8001/", key), 502, "bad_gateway")
	e.fake.mu.Lock()
	e.fake.recs["sbx-1"].State = sandbox.StatePaused
	e.fake.mu.Unlock()
	wantPreviewStatus(t, "paused", e.get(path, key), 409, "conflict")
	e.fake.mu.Lock()
	e.fake.recs["sbx-1"].State = sandbox.StateEnded
	e.fake.mu.Unlock()
	wantPreviewStatus(t, "ended", e.get(path, key), 404, "not_found")
	wantPreviewStatus(t, "ended, a token asked", e.do("GET", "/v1/sandboxes/sbx-1/previews/8000", e.keys[store.KeyFull], nil), 404, "not_found")
}

// TestPreviewAnswerTamed: what a sandbox answers stays on its preview.
func TestPreviewAnswerTamed(t *testing.T) {
	e, _ := previewEnv(t)
	key := map[string]string{"Authorization": "Bearer " + e.keys[store.KeyFull]}
	resp := e.get("/v1/sandboxes/sbx-1/ports/8000/cookies", key)
	wantPreviewStatus(t, "cookies", resp, 200, "")
	cookies := resp.Header.Values("Set-Cookie")
	if len(cookies) != 1 || !strings.HasPrefix(cookies[0], "app=1; Path=/v1/sandboxes/sbx-1/ports/8000/admin;") || strings.Contains(strings.ToLower(cookies[0]), "domain") {
		t.Errorf("Set-Cookie %q: want the app's cookie under its path, without its Domain, and no preview cookie", cookies)
	}
	for _, h := range []string{"Strict-Transport-Security", "Clear-Site-Data", "Alt-Svc"} {
		if resp.Header.Get(h) != "" {
			t.Errorf("%s passed through", h)
		}
	}
	if csp := resp.Header.Values("Content-Security-Policy"); len(csp) != 1 || !strings.HasPrefix(csp[0], "sandbox ") {
		t.Errorf("Content-Security-Policy %q: want the path form's sandbox", csp)
	}
	wantPreviewStatus(t, "a redirect to another host", e.get("/v1/sandboxes/sbx-1/ports/8000/away", key), 502, "bad_gateway")
	resp = e.get("/v1/sandboxes/sbx-1/ports/8000/local", key)
	wantPreviewStatus(t, "a redirect on the preview", resp, 302, "")
	if loc := resp.Header.Get("Location"); loc != "/v1/sandboxes/sbx-1/ports/8000/next?x=1" {
		t.Errorf("Location %q: want it under the preview's path", loc)
	}
}

// TestPreviewStreams: server-sent events arrive as they are sent, and a
// WebSocket goes through.
func TestPreviewStreams(t *testing.T) {
	e, app := previewEnv(t)
	key := map[string]string{"Authorization": "Bearer " + e.keys[store.KeyFull]}
	resp := e.get("/v1/sandboxes/sbx-1/ports/8000/sse", key)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event: %q, %v (before the stream ended)", line, err)
	}
	close(app.sse)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(e.url, "http") + "/v1/sandboxes/sbx-1/ports/8000/ws"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.keys[store.KeyFull]}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.Read(ctx); err != nil || string(b) != "echo:hi" {
		t.Fatalf("echo: %q, %v", b, err)
	}
}

// TestPreviewHostForm: {port}-{id}.{domain} reaches the port with the
// path and Host as they are; other hosts are not found.
func TestPreviewHostForm(t *testing.T) {
	secret := make([]byte, PreviewSecretSize)
	e, _ := previewEnvWith(t, secret)
	srv := httptest.NewServer(PreviewHandler(e.handler))
	t.Cleanup(srv.Close)
	p := e.preview("sbx-1", "8000")
	send := func(host, path string, h map[string]string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+path, nil)
		req.Host = host
		for k, v := range h {
			req.Header.Set(k, v)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	host := "8000-sbx-1.preview.test:8443"
	wantPreviewStatus(t, "host form, no credential", send(host, "/echo/x", nil), 401, "unauthorized")
	resp := send(host, "/echo/x?"+api.PreviewTokenParam+"="+url.QueryEscape(p.Token), nil)
	wantPreviewStatus(t, "host form, signed URL", resp, 303, "")
	if ck := resp.Cookies(); len(ck) != 1 || ck[0].Path != "/" || ck[0].Domain != "" {
		t.Errorf("cookie %+v: want one for this host's every path", ck)
	}
	resp = send(host, "/echo/x", map[string]string{api.PreviewTokenHeader: p.Token})
	wantPreviewStatus(t, "host form, token", resp, 200, "")
	if s := readSeen(t, resp); s.Path != "/echo/x" || s.Host != host {
		t.Errorf("the app saw %s Host %s", s.Path, s.Host)
	}
	if resp.Header.Get("Content-Security-Policy") != "" {
		t.Error("the host form's pages have their own origin: no sandboxing CSP")
	}
	wantPreviewStatus(t, "another domain", send("8000-sbx-1.other.test", "/", nil), 404, "not_found")
	wantPreviewStatus(t, "no port", send("sbx-1.preview.test", "/", nil), 404, "not_found")
	wantPreviewStatus(t, "the API's paths are not served there", send("api.preview.test", "/v1/sandboxes", map[string]string{"Authorization": "Bearer " + e.keys[store.KeyFull]}), 404, "not_found")
}

// TestPreviewBounds: past the bound of requests in flight per sandbox,
// 429; the sandbox's neighbour is served.
func TestPreviewBounds(t *testing.T) {
	e, app := previewEnv(t)
	key := "Bearer " + e.keys[store.KeyFull]
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := make(chan error, maxPreviewConnsPerSandbox)
	for range maxPreviewConnsPerSandbox {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/sandboxes/sbx-1/ports/8000/sse", nil)
			req.Header.Set("Authorization", key)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, err = bufio.NewReader(resp.Body).ReadString('\n')
				defer resp.Body.Close()
			}
			started <- err
			<-ctx.Done()
		}()
	}
	for range maxPreviewConnsPerSandbox {
		if err := <-started; err != nil {
			t.Fatal(err)
		}
	}
	h := map[string]string{"Authorization": key}
	wantPreviewStatus(t, "one too many", e.get("/v1/sandboxes/sbx-1/ports/8000/echo/", h), 429, "rate_limited")
	wantPreviewStatus(t, "the neighbour", e.get("/v1/sandboxes/sbx-2/ports/8000/echo/", h), 200, "")
	_ = app
}

// TestSandboxMetricsRoute: the window's bounds in either form, and bad
// ones refused.
func TestSandboxMetricsRoute(t *testing.T) {
	e := newEnv(t, nil)
	get := func(q string) (int, api.SandboxMetrics) {
		resp := e.do("GET", "/v1/sandboxes/sbx-1/metrics"+q, e.keys[store.KeyReadOnly], nil)
		var m api.SandboxMetrics
		if resp.StatusCode == 200 {
			json.NewDecoder(resp.Body).Decode(&m)
		}
		return resp.StatusCode, m
	}
	if code, m := get(""); code != 200 || len(m.Metrics) != 2 {
		t.Errorf("all: %d %+v", code, m)
	}
	if code, m := get("?start=2026-03-01T12:00:01Z"); code != 200 || len(m.Metrics) != 1 {
		t.Errorf("from RFC 3339: %d %+v", code, m)
	}
	if code, m := get("?end=" + strconv.FormatInt(time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC).Unix(), 10)); code != 200 || len(m.Metrics) != 1 {
		t.Errorf("to Unix seconds: %d %+v", code, m)
	}
	for _, q := range []string{"?start=yesterday", "?start=2026-03-02T00:00:00Z&end=2026-03-01T00:00:00Z"} {
		if code, _ := get(q); code != 400 {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
	wantPreviewStatus(t, "another account's sandbox", e.do("GET", "/v1/sandboxes/sbx-admin/metrics", e.keys[store.KeyFull], nil), 404, "not_found")
}
