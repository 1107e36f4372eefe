package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// The ports the preview app (testdata/previewapp.py) serves in the
// sandboxes: an HTTP app, and a server that never answers.
const (
	appPort    = 8000
	silentPort = 8001
	// deadPort has nothing listening.
	deadPort = 8009
)

// previewRig is one real server serving the preview URLs' host form,
// and sandboxes running the preview app. TestPreview's serves it on its
// API address (--preview-domain localhost, as the local daemon does) and
// runs two: a, the one attacked, and b, its neighbour, whose preview and
// exec must keep answering whatever a's app does.
type previewRig struct {
	s      *testenv.Server
	c      *client.Client
	a, b   string
	domain string
	port   string // the port the host form's URLs name
	hc     *http.Client
	target string // where the test sends the host form's requests
	app    []byte
}

// startPreviewRig starts a server with --preview-domain domain and extra
// flags; target is the host form's address ("": the API's).
func startPreviewRig(t *testing.T, domain, target string, extra ...string) *previewRig {
	t.Helper()
	s := testenv.StartServer(t, append([]string{"--preview-domain", domain}, extra...)...)
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	if target == "" {
		target = s.Addr
	}
	_, port, _ := net.SplitHostPort(target)
	r := &previewRig{s: s, c: c, domain: domain, port: port, target: target,
		// Redirects are the tests' to see; a connection per request, so
		// that no test's request waits behind another's.
		hc: &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport:     &http.Transport{DisableKeepAlives: true},
		},
	}
	if r.app, err = os.ReadFile(filepath.Join("testdata", "previewapp.py")); err != nil {
		t.Fatal(err)
	}
	return r
}

// startApps starts a sandbox running the preview app for each key (the
// key of its account), in parallel, and returns their ids.
func (r *previewRig) startApps(t *testing.T, keys ...string) []string {
	t.Helper()
	ids := make([]string, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() {
			ids[i], errs[i] = r.startApp(t.Context(), key)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// startApp creates a sandbox of key's account running the preview app and
// waits until its page answers through the preview.
func (r *previewRig) startApp(ctx context.Context, key string) (string, error) {
	c, err := client.New(client.WithBaseURL(r.s.URL), client.WithAPIKey(key))
	if err != nil {
		return "", err
	}
	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 1024, TimeoutSeconds: 1200})
	if err != nil {
		return "", err
	}
	if _, err := c.WriteFile(ctx, sb.ID, "/tmp/app.py", strings.NewReader(string(r.app)), 0o644); err != nil {
		return sb.ID, err
	}
	cmd := api.Command{Argv: []string{"python3", "/tmp/app.py", strconv.Itoa(appPort), strconv.Itoa(silentPort)}}
	if _, err := c.StartProcess(ctx, sb.ID, api.ExecRequest{Cmd: cmd, Background: true}); err != nil {
		return sb.ID, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		req := r.pathReq(sb.ID, appPort, "/", key)
		resp, err := r.hc.Do(req.WithContext(ctx))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return sb.ID, nil
			}
		}
		if time.Now().After(deadline) {
			return sb.ID, fmt.Errorf("the app of %s never answered through its preview: %v %v", sb.ID, resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pathReq is a GET of the path form of id's port; auth "key" sends the
// admin key, "" nothing, anything else is sent as the key.
func (r *previewRig) pathReq(id string, port int, path, auth string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d%s", r.s.URL, id, port, path), nil)
	if err != nil {
		panic(err)
	}
	setAuth(req, r.s.Key, auth)
	return req
}

// hostReq is the same GET in the host form, {port}-{id}.{domain}: sent to
// the rig's target with that Host, as a browser resolving the name to
// loopback sends it (Go's resolver need not resolve *.localhost).
func (r *previewRig) hostReq(id string, port int, path, auth string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, "http://"+r.target+path, nil)
	if err != nil {
		panic(err)
	}
	req.Host = r.host(id, port)
	setAuth(req, r.s.Key, auth)
	return req
}

func (r *previewRig) host(id string, port int) string {
	return fmt.Sprintf("%d-%s.%s:%s", port, id, r.domain, r.port)
}

func setAuth(req *http.Request, admin, auth string) {
	switch auth {
	case "":
	case "key":
		req.Header.Set("Authorization", "Bearer "+admin)
	default:
		req.Header.Set("Authorization", "Bearer "+auth)
	}
}

// forms are the two ways to name a preview.
var previewForms = []string{"path", "host"}

func (r *previewRig) req(form, id string, port int, path, auth string) *http.Request {
	if form == "host" {
		return r.hostReq(id, port, path, auth)
	}
	return r.pathReq(id, port, path, auth)
}

// do sends req and returns the answer with its body read.
func (r *previewRig) do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := r.hc.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", req.Method, req.URL, req.Host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// expect sends req and fails unless the status (and, for errors, the
// code) is as wanted.
func (r *previewRig) expect(t *testing.T, req *http.Request, status int, code string) []byte {
	t.Helper()
	resp, body := r.do(t, req)
	if resp.StatusCode != status || (code != "" && errorCode(body) != code) {
		t.Fatalf("%s %s (Host %s): got %d %s, want %d %s", req.Method, req.URL, req.Host, resp.StatusCode, trim(body), status, code)
	}
	return body
}

func trim(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// preview reads GET .../previews/{port} of id with the API key.
func (r *previewRig) preview(t *testing.T, id string, port int) api.Preview {
	t.Helper()
	status, body := call(t, r.s, r.s.Key, http.MethodGet, fmt.Sprintf("/v1/sandboxes/%s/previews/%d", id, port), nil)
	if status != http.StatusOK {
		t.Fatalf("GET previews/%d: %d %s", port, status, body)
	}
	var p api.Preview
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// neighbourAnswers checks that b's preview and exec answer promptly.
func (r *previewRig) neighbourAnswers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := r.hc.Do(r.pathReq(r.b, appPort, "/headers", "key").WithContext(ctx))
	if err != nil {
		return fmt.Errorf("the neighbour's preview: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the neighbour's preview answered %s", resp.Status)
	}
	res, err := r.c.Exec(ctx, r.b, api.ExecRequest{Cmd: api.Command{Argv: []string{"echo", "neighbour-ok"}}}, client.ExecOptions{})
	if err != nil || res.Stdout != "neighbour-ok\n" {
		return fmt.Errorf("the neighbour's exec: %v %+v", err, res)
	}
	if d := time.Since(start); d > 10*time.Second {
		return fmt.Errorf("the neighbour's preview and exec took %s", d)
	}
	return nil
}

// serverRSS is the server process's resident memory in bytes.
func serverRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestPreview attacks the preview boundary of a real server from outside,
// in the path form and the host form, against an app in a real sandbox
// that listens on the sandbox's loopback only: who gets in (keys, tokens,
// signed URLs, public ports, revokes), what of the caller's credentials
// reaches the app, streams (SSE, WebSocket, a 100 MB download), a hostile
// or absent app, and the sandbox's life (paused, ended). Its subtests
// share one server and two sandboxes, and run in order: the last ones
// pause and end them.
func TestPreview(t *testing.T) {
	r := startPreviewRig(t, "localhost", "")
	ids := r.startApps(t, r.s.Key, r.s.Key)
	r.a, r.b = ids[0], ids[1]
	a := r.a

	t.Run("no credential is 401", func(t *testing.T) {
		for _, form := range previewForms {
			r.expect(t, r.req(form, a, appPort, "/", ""), http.StatusUnauthorized, "unauthorized")
			// Nor for a sandbox that does not exist: the answer says
			// nothing of which ids are real.
			r.expect(t, r.req(form, "sb-nosuchsandbox", appPort, "/", ""), http.StatusUnauthorized, "unauthorized")
		}
	})

	t.Run("an API key opens the page", func(t *testing.T) {
		for _, form := range previewForms {
			body := r.expect(t, r.req(form, a, appPort, "/", "key"), http.StatusOK, "")
			if !strings.Contains(string(body), "<title>preview app</title>") {
				t.Fatalf("%s form: not the app's page: %s", form, trim(body))
			}
		}
		// A wrong key is refused, not taken for no credential.
		req := r.pathReq(a, appPort, "/", "")
		req.Header.Set("Authorization", "Bearer wr_not-a-key")
		r.expect(t, req, http.StatusUnauthorized, "unauthorized")
	})

	t.Run("the app never sees the credentials", func(t *testing.T) {
		tok := r.preview(t, a, appPort).Token
		for _, form := range previewForms {
			// Every way of carrying a credential at once, beside a
			// cookie of the app's own.
			req := r.req(form, a, appPort, "/headers?q=1", "key")
			req.Header.Set(api.PreviewTokenHeader, tok)
			req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
			req.Header.Set("Cookie", "app=1; withruntime_preview="+tok+"; other=2")
			// The caller's own claims about where it is are replaced.
			req.Header.Set("X-Forwarded-For", "192.0.2.66")
			req.Header.Set("X-Forwarded-Host", "elsewhere.example")
			body := r.expect(t, req, http.StatusOK, "")
			var seen struct {
				Path    string
				Headers [][2]string
			}
			if err := json.Unmarshal(body, &seen); err != nil {
				t.Fatalf("%s form: %v: %s", form, err, body)
			}
			if seen.Path != "/headers?q=1" {
				t.Errorf("%s form: the app saw the path %q, want /headers?q=1", form, seen.Path)
			}
			var cookie, host string
			for _, h := range seen.Headers {
				switch strings.ToLower(h[0]) {
				case "x-forwarded-for":
					if h[1] != "127.0.0.1" {
						t.Errorf("%s form: the app saw X-Forwarded-For %q, want the caller's address 127.0.0.1", form, h[1])
					}
				case "x-forwarded-host":
					if strings.Contains(h[1], "elsewhere") {
						t.Errorf("%s form: the app saw the caller's X-Forwarded-Host %q", form, h[1])
					}
				case "authorization", "proxy-authorization", strings.ToLower(api.PreviewTokenHeader):
					t.Errorf("%s form: the app saw %s: %s", form, h[0], h[1])
				case "cookie":
					cookie = h[1]
				case "host":
					host = h[1]
				}
			}
			if strings.Contains(string(body), r.s.Key) || strings.Contains(string(body), tok) || strings.Contains(string(body), "withruntime_preview") {
				t.Errorf("%s form: the key or the token reached the app: %s", form, body)
			}
			if cookie != "app=1; other=2" {
				t.Errorf("%s form: the app's cookies arrived as %q, want \"app=1; other=2\"", form, cookie)
			}
			want := "127.0.0.1:8000"
			if form == "host" {
				want = r.host(a, appPort)
			}
			if host != want {
				t.Errorf("%s form: the app saw Host %q, want %q", form, host, want)
			}
		}
	})

	t.Run("the app's answer stays on its own preview", func(t *testing.T) {
		answer := func(form string, q url.Values) *http.Request {
			return r.req(form, a, appPort, "/answer?"+q.Encode(), "key")
		}
		for _, form := range previewForms {
			// Cookies for every host of the domain, a forged preview
			// cookie, and headers that would act on the whole host.
			q := url.Values{
				"Set-Cookie":                {"app=1; Domain=localhost; Path=/", "withruntime_preview=forged; Path=/"},
				"Strict-Transport-Security": {"max-age=31536000; includeSubDomains"},
				"Alt-Svc":                   {`h3=":443"`},
				"Clear-Site-Data":           {`"*"`},
			}
			resp, body := r.do(t, answer(form, q))
			if resp.StatusCode != http.StatusOK || string(body) != "ok" {
				t.Fatalf("%s form: %d %s", form, resp.StatusCode, trim(body))
			}
			for _, h := range []string{"Strict-Transport-Security", "Alt-Svc", "Clear-Site-Data"} {
				if v := resp.Header.Get(h); v != "" {
					t.Errorf("%s form: the app's %s reached the client: %q", form, h, v)
				}
			}
			wantPath := "/"
			if form == "path" {
				wantPath = fmt.Sprintf("/v1/sandboxes/%s/ports/%d/", a, appPort)
			}
			cookies := resp.Cookies()
			if len(cookies) != 1 || cookies[0].Name != "app" || cookies[0].Domain != "" || cookies[0].Path != wantPath {
				t.Errorf("%s form: the app's cookies arrived as %q, want only app=1 with no Domain and Path %s", form, resp.Header.Values("Set-Cookie"), wantPath)
			}
			// The path form serves the app from the API's origin: the page
			// is sandboxed into an opaque origin of its own.
			csp := resp.Header.Get("Content-Security-Policy")
			if form == "path" && !strings.HasPrefix(csp, "sandbox ") || form == "host" && csp != "" {
				t.Errorf("%s form: Content-Security-Policy %q", form, csp)
			}
			// A redirect elsewhere is the sandbox's error, not a way out.
			r.expect(t, answer(form, url.Values{"status": {"302"}, "Location": {"http://elsewhere.example/"}}), http.StatusBadGateway, "bad_gateway")
			// One within the preview stays within it.
			resp, body = r.do(t, answer(form, url.Values{"status": {"302"}, "Location": {"/next?x=1"}}))
			want := "/next?x=1"
			if form == "path" {
				want = fmt.Sprintf("/v1/sandboxes/%s/ports/%d/next?x=1", a, appPort)
			}
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
				t.Errorf("%s form: a redirect to /next?x=1 came as %d to %q, want 302 to %q (%s)", form, resp.StatusCode, resp.Header.Get("Location"), want, trim(body))
			}
			// Headers past 64 KiB are the sandbox's error too.
			r.expect(t, answer(form, url.Values{"fill": {"70000"}}), http.StatusBadGateway, "bad_gateway")
		}
		// The host form's own host is the preview's: a redirect to it stays.
		self := "http://" + r.host(a, appPort) + "/again"
		resp, _ := r.do(t, answer("host", url.Values{"status": {"302"}, "Location": {self}}))
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != self {
			t.Errorf("a redirect to the preview's own host came as %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		// A host that merely ends like the domain is not a preview.
		req := r.hostReq(a, appPort, "/", "key")
		req.Host = fmt.Sprintf("%d-%s.localhost.elsewhere.example:%s", appPort, a, r.port)
		resp, body := r.do(t, req)
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "preview app") {
			t.Errorf("Host %s reached the app", req.Host)
		}
	})

	t.Run("tokens open their sandbox and port only", func(t *testing.T) {
		tokA, tokA2, tokB := r.preview(t, a, appPort).Token, r.preview(t, a, silentPort).Token, r.preview(t, r.b, appPort).Token
		if !strings.HasPrefix(tokA, "wrpt_") || strings.Contains(tokA, r.s.Key) {
			t.Fatalf("token %q: want a wrpt_ token that is not the key", tokA)
		}
		for _, form := range previewForms {
			withTok := func(tok string) *http.Request {
				req := r.req(form, a, appPort, "/", "")
				req.Header.Set(api.PreviewTokenHeader, tok)
				return req
			}
			r.expect(t, withTok(tokA), http.StatusOK, "")
			r.expect(t, withTok(tokB), http.StatusUnauthorized, "unauthorized")
			r.expect(t, withTok(tokA2), http.StatusUnauthorized, "unauthorized")
			r.expect(t, withTok(tokA[:len(tokA)-2]+"AA"), http.StatusUnauthorized, "unauthorized")
			r.expect(t, withTok(r.s.Key), http.StatusUnauthorized, "unauthorized")
		}
	})

	// signed opens a signed URL in form and returns the cookie line it set.
	signed := func(t *testing.T, form, tok string) string {
		t.Helper()
		req := r.req(form, a, appPort, "/headers?x=1&"+api.PreviewTokenParam+"="+url.QueryEscape(tok), "")
		resp, body := r.do(t, req)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s form: a signed URL answered %d %s, want 303", form, resp.StatusCode, trim(body))
		}
		loc := resp.Header.Get("Location")
		wantLoc := "/headers?x=1"
		if form == "path" {
			wantLoc = fmt.Sprintf("/v1/sandboxes/%s/ports/%d/headers?x=1", a, appPort)
		}
		if loc != wantLoc {
			t.Fatalf("%s form: the signed URL sent to %q, want %q (the same without the token)", form, loc, wantLoc)
		}
		var ck *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "withruntime_preview" {
				ck = c
			}
		}
		if ck == nil || !ck.HttpOnly || ck.Value != tok || ck.SameSite != http.SameSiteLaxMode {
			t.Fatalf("%s form: the signed URL set %q, want an HttpOnly SameSite=Lax withruntime_preview cookie holding the token", form, resp.Header.Values("Set-Cookie"))
		}
		return ck.Name + "=" + ck.Value
	}

	t.Run("a signed URL sets a cookie that opens the page", func(t *testing.T) {
		tok := r.preview(t, a, appPort).Token
		for _, form := range previewForms {
			cookie := signed(t, form, tok)
			req := r.req(form, a, appPort, "/headers?x=1", "")
			req.Header.Set("Cookie", cookie)
			body := r.expect(t, req, http.StatusOK, "")
			if strings.Contains(string(body), tok) {
				t.Fatalf("%s form: the token reached the app: %s", form, body)
			}
			// The cookie is the preview's: another port is still shut.
			req = r.req(form, a, silentPort, "/", "")
			req.Header.Set("Cookie", cookie)
			r.expect(t, req, http.StatusUnauthorized, "unauthorized")
			// Another site's page cannot ride on the cookie.
			req = r.req(form, a, appPort, "/headers", "")
			req.Method = http.MethodPost
			req.Header.Set("Cookie", cookie)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			req.Header.Set("Sec-Fetch-Mode", "cors")
			r.expect(t, req, http.StatusUnauthorized, "unauthorized")
		}
		// A WebSocket handshake with the cookie, as a browser sends it
		// from a page of another preview of the same site (under a real
		// preview domain, every preview is one site; Chromium sends no
		// Sec-Fetch-Site on a handshake, only the Origin): refused. From
		// the preview's own origin: the echo.
		cookie := signed(t, "host", tok)
		wsDial := func(origin string) (*websocket.Conn, *http.Response, error) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, r.target)
			}}}
			return websocket.Dial(ctx, "ws://"+r.host(a, appPort)+"/ws", &websocket.DialOptions{
				HTTPClient: hc, HTTPHeader: http.Header{"Cookie": {cookie}, "Origin": {origin}},
			})
		}
		for _, origin := range []string{"http://" + r.host(r.b, appPort), "null", "http://elsewhere.example"} {
			ws, resp, err := wsDial(origin)
			if err == nil {
				ws.CloseNow()
				t.Fatalf("a WebSocket from Origin %s opened with the cookie", origin)
			}
			if resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a WebSocket from Origin %s: %v %v, want 401", origin, resp, err)
			}
		}
		ws, _, err := wsDial("http://" + r.host(a, appPort))
		if err != nil {
			t.Fatalf("a WebSocket from the preview's own origin: %v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := ws.Write(ctx, websocket.MessageText, []byte("own")); err != nil {
			t.Fatal(err)
		}
		if _, got, err := ws.Read(ctx); err != nil || string(got) != "echo:nwo" {
			t.Fatalf("echo from the own origin: %q %v", got, err)
		}
		ws.Close(websocket.StatusNormalClosure, "")
		// Another sandbox's token in a signed URL sets nothing.
		req := r.req("host", a, appPort, "/?"+api.PreviewTokenParam+"="+url.QueryEscape(r.preview(t, r.b, appPort).Token), "")
		resp, body := r.do(t, req)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Fatalf("another sandbox's signed URL: got %d %v %s, want 401 and no cookie", resp.StatusCode, resp.Cookies(), trim(body))
		}
	})

	t.Run("revoke voids every token", func(t *testing.T) {
		tok := r.preview(t, a, appPort).Token
		cookie := signed(t, "host", tok)
		status, body := call(t, r.s, r.s.Key, http.MethodPost, "/v1/sandboxes/"+a+"/previews/revoke", nil)
		if status != http.StatusOK {
			t.Fatalf("revoke: %d %s", status, body)
		}
		for _, form := range previewForms {
			req := r.req(form, a, appPort, "/", "")
			req.Header.Set(api.PreviewTokenHeader, tok)
			r.expect(t, req, http.StatusUnauthorized, "unauthorized")
		}
		req := r.req("host", a, appPort, "/", "")
		req.Header.Set("Cookie", cookie)
		r.expect(t, req, http.StatusUnauthorized, "unauthorized")
		// A signed URL of the old token sets no cookie any more.
		r.expect(t, r.req("host", a, appPort, "/?"+api.PreviewTokenParam+"="+tok, ""), http.StatusUnauthorized, "unauthorized")
		// A token made after the revoke works.
		req = r.req("path", a, appPort, "/", "")
		req.Header.Set(api.PreviewTokenHeader, r.preview(t, a, appPort).Token)
		r.expect(t, req, http.StatusOK, "")
	})

	t.Run("a public port opens with nothing", func(t *testing.T) {
		put := func(public bool) {
			t.Helper()
			status, body := call(t, r.s, r.s.Key, http.MethodPut, fmt.Sprintf("/v1/sandboxes/%s/previews/%d", a, appPort), strings.NewReader(fmt.Sprintf(`{"public":%v}`, public)))
			var p api.Preview
			json.Unmarshal(body, &p)
			if status != http.StatusOK || p.Public != public || (p.Token == "") != public {
				t.Fatalf("PUT public=%v: %d %s", public, status, body)
			}
		}
		put(true)
		for _, form := range previewForms {
			r.expect(t, r.req(form, a, appPort, "/", ""), http.StatusOK, "")
			// Only that port, and only of that sandbox.
			r.expect(t, r.req(form, a, silentPort, "/", ""), http.StatusUnauthorized, "unauthorized")
			r.expect(t, r.req(form, r.b, appPort, "/", ""), http.StatusUnauthorized, "unauthorized")
		}
		status, body := call(t, r.s, r.s.Key, http.MethodGet, "/v1/sandboxes/"+a+"/previews", nil)
		var settings api.PreviewSettings
		json.Unmarshal(body, &settings)
		if status != http.StatusOK || fmt.Sprint(settings.PublicPorts) != "[8000]" {
			t.Fatalf("GET previews: %d %s, want public_ports [8000]", status, body)
		}
		put(false)
		for _, form := range previewForms {
			r.expect(t, r.req(form, a, appPort, "/", ""), http.StatusUnauthorized, "unauthorized")
		}
		// Every port at once (E2B's public traffic): a port with nothing
		// listening is then the 502, not the 401; another sandbox stays
		// shut.
		all := func(on bool) {
			t.Helper()
			status, body := call(t, r.s, r.s.Key, http.MethodPut, "/v1/sandboxes/"+a+"/previews", strings.NewReader(fmt.Sprintf(`{"all_public":%v}`, on)))
			if status != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf(`"all_public":%v`, on)) {
				t.Fatalf("PUT previews all_public=%v: %d %s", on, status, body)
			}
		}
		all(true)
		for _, form := range previewForms {
			r.expect(t, r.req(form, a, appPort, "/", ""), http.StatusOK, "")
			r.expect(t, r.req(form, a, deadPort, "/", ""), http.StatusBadGateway, "bad_gateway")
			r.expect(t, r.req(form, r.b, appPort, "/", ""), http.StatusUnauthorized, "unauthorized")
		}
		all(false)
		for _, form := range previewForms {
			r.expect(t, r.req(form, a, appPort, "/", ""), http.StatusUnauthorized, "unauthorized")
			r.expect(t, r.req(form, a, deadPort, "/", ""), http.StatusUnauthorized, "unauthorized")
		}
	})

	t.Run("nothing listening is 502 at once", func(t *testing.T) {
		for _, form := range previewForms {
			start := time.Now()
			r.expect(t, r.req(form, a, deadPort, "/", "key"), http.StatusBadGateway, "bad_gateway")
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("%s form: the 502 took %s", form, d)
			}
		}
	})

	t.Run("SSE events arrive as they are sent", func(t *testing.T) {
		for _, form := range previewForms {
			start := time.Now()
			resp, err := r.hc.Do(r.req(form, a, appPort, "/sse", "key").WithContext(t.Context()))
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			first := time.Since(start)
			if err != nil || line != "data: event-0\n" {
				t.Fatalf("%s form: first line %q, %v", form, line, err)
			}
			rest, _ := io.ReadAll(br)
			resp.Body.Close()
			all := time.Since(start)
			if !strings.Contains(string(rest), "data: event-1") {
				t.Fatalf("%s form: the stream ended without the second event: %q", form, rest)
			}
			// The app sleeps 2s after each event: a buffered stream
			// would deliver the first event with the last, 4s later.
			if all-first < 3*time.Second {
				t.Fatalf("%s form: the first event came after %s, the stream ended after %s: the events were held back", form, first, all)
			}
		}
	})

	t.Run("a WebSocket through the path form", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		u := fmt.Sprintf("ws%s/v1/sandboxes/%s/ports/%d/ws", strings.TrimPrefix(r.s.URL, "http"), a, appPort)
		ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + r.s.Key}}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		for _, msg := range []string{"abc", strings.Repeat("0123456789", 100)} {
			if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, got, err := ws.Read(ctx)
			if err != nil || string(got) != "echo:"+reverse(msg) {
				t.Fatalf("echo of %d bytes: %q, %v", len(msg), trim(got), err)
			}
		}
		ws.Close(websocket.StatusNormalClosure, "")
	})

	t.Run("100 MB stream through while the neighbour answers", func(t *testing.T) {
		const size = 100 << 20
		resp, err := r.hc.Do(r.pathReq(a, appPort, fmt.Sprintf("/big?n=%d", size), "key").WithContext(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("download: %s", resp.Status)
		}
		base := serverRSS(t, r.s.Pid())
		n, err := io.CopyN(io.Discard, resp.Body, 10<<20)
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		// The reader stalls with 90 MB still to come: a proxy that
		// buffered would now hold them. The neighbour meanwhile answers.
		if err := r.neighbourAnswers(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if grown := serverRSS(t, r.s.Pid()) - base; grown > 48<<20 {
			t.Errorf("the server grew by %d MiB while the reader stalled: it buffers the stream", grown>>20)
		}
		m, err := io.Copy(io.Discard, resp.Body)
		if n+m != size || err != nil {
			t.Fatalf("got %d bytes (%v), want %d", n+m, err, size)
		}
		// And once more with the neighbour probed while it streams at
		// full speed.
		done := make(chan error, 1)
		go func() {
			resp, err := r.hc.Do(r.hostReq(a, appPort, fmt.Sprintf("/big?n=%d", size), "key").WithContext(t.Context()))
			if err != nil {
				done <- err
				return
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			if n != size {
				err = fmt.Errorf("host form: got %d bytes (%v), want %d", n, err, size)
			}
			done <- err
		}()
		if err := r.neighbourAnswers(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an app that never answers does not hold up the neighbour", func(t *testing.T) {
		// Many more requests than the per-sandbox bound (256) to a port
		// that accepts and never answers.
		const reqs = 300
		ctx, cancel := context.WithCancel(t.Context())
		var limited, other atomic.Int64
		var wg sync.WaitGroup
		for range reqs {
			wg.Go(func() {
				resp, err := r.hc.Do(r.pathReq(a, silentPort, "/", "key").WithContext(ctx))
				if err != nil {
					return // canceled below, still waiting
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests && errorCode(body) == "rate_limited" {
					limited.Add(1)
				} else {
					other.Add(1)
					t.Errorf("a request to the silent port got %d %s", resp.StatusCode, trim(body))
				}
			})
		}
		// Until every request beyond the bound was refused.
		deadline := time.Now().Add(time.Minute)
		for limited.Load() < reqs-256 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if got := limited.Load(); got != reqs-256 {
			cancel()
			wg.Wait()
			t.Fatalf("%d of %d requests were refused with 429, want %d (256 in flight at most)", got, reqs, reqs-256)
		}
		// The sandbox's own previews wait for room too, but its API and
		// its neighbour do not.
		r.expect(t, r.pathReq(a, appPort, "/", "key"), http.StatusTooManyRequests, "rate_limited")
		if err := r.neighbourAnswers(t.Context()); err != nil {
			t.Fatal(err)
		}
		res, err := r.c.Exec(t.Context(), a, api.ExecRequest{Cmd: api.Command{Argv: []string{"true"}}}, client.ExecOptions{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec in the sandbox whose app hangs: %v %+v", err, res)
		}
		cancel()
		wg.Wait()
		if other.Load() != 0 {
			t.Fatalf("%d requests got something other than 429", other.Load())
		}
		// The callers left: their room is back.
		deadline = time.Now().Add(30 * time.Second)
		for {
			resp, body := r.do(t, r.pathReq(a, appPort, "/", "key"))
			if resp.StatusCode == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the callers left: %d %s", resp.StatusCode, trim(body))
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("a real browser", func(t *testing.T) {
		browserPreview(t, r)
	})

	t.Run("a paused sandbox is 409", func(t *testing.T) {
		tok := r.preview(t, r.b, appPort).Token
		if _, err := r.c.PauseSandbox(t.Context(), r.b); err != nil {
			t.Fatal(err)
		}
		for _, form := range previewForms {
			r.expect(t, r.req(form, r.b, appPort, "/", "key"), http.StatusConflict, "conflict")
			req := r.req(form, r.b, appPort, "/", "")
			req.Header.Set(api.PreviewTokenHeader, tok)
			r.expect(t, req, http.StatusConflict, "conflict")
		}
	})

	t.Run("an ended sandbox is 404", func(t *testing.T) {
		tok := r.preview(t, a, appPort).Token
		if _, err := r.c.StopSandbox(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		for _, form := range previewForms {
			r.expect(t, r.req(form, a, appPort, "/", "key"), http.StatusNotFound, "not_found")
			req := r.req(form, a, appPort, "/", "")
			req.Header.Set(api.PreviewTokenHeader, tok)
			r.expect(t, req, http.StatusNotFound, "not_found")
		}
		status, body := call(t, r.s, r.s.Key, http.MethodGet, fmt.Sprintf("/v1/sandboxes/%s/previews/%d", a, appPort), nil)
		if status != http.StatusNotFound {
			t.Fatalf("GET previews of an ended sandbox: %d %s", status, body)
		}
	})
}
