package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/withruntime/withruntime/api"
)

// chromiumPath is Debian's chromium, which scripts/test.sh installs: the
// tests never download a browser build.
const chromiumPath = "/usr/bin/chromium"

// browserPreview drives a real browser (headless Chromium over the
// DevTools protocol) to the host form of a's preview, as a person opening
// a signed URL would: the page, served from inside the sandbox, opens a
// WebSocket back to its own origin, sends a text and writes the app's
// answer into the page. The bare URL is refused until the port is public.
// requireChromium fails (never skips) the test without the browser.
func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		// Not a skip: a missing browser must not pass for a working preview.
		t.Fatalf("%s is missing: scripts/test.sh installs it (apt-get install chromium): %v", chromiumPath, err)
	}
}

// browserTab is a tab of a headless Chromium of the test's own (a fresh
// profile), driven over the DevTools protocol.
type browserTab struct{ ctx context.Context }

// startBrowser starts Chromium with the flags every test uses and extra;
// it ends with the test.
func startBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *browserTab {
	t.Helper()
	requireChromium(t)
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // root, as the e2e tests run
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// Loopback only, whatever proxy the environment names.
		chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(t.TempDir()),
	}, extra...)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	// The browser lives as long as this context: no timeout on it (see
	// chromedp.Run); each step gets its own.
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	return &browserTab{ctx: ctx}
}

// open navigates to u and returns the document's answer.
func (b *browserTab) open(t *testing.T, u string) *network.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
	if err != nil {
		t.Fatalf("opening %s: %v", u, err)
	}
	return resp
}

// echo waits until the preview app's page shows its WebSocket's echo
// (or "closed"), and returns it.
func (b *browserTab) echo(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Poll[string](`document.getElementById("echo") && document.getElementById("echo").textContent`))
	if err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("the page never showed the echo: %v (page: %q)", err, page)
	}
	return got
}

// eval evaluates a JavaScript expression of string value in the page.
func (b *browserTab) eval(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// clearCookies forgets every cookie of the browser.
func (b *browserTab) clearCookies(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
}

func browserPreview(t *testing.T, r *previewRig) {
	b := startBrowser(t)
	base := "http://" + r.host(r.a, appPort) + "/"

	t.Run("the bare URL is refused", func(t *testing.T) {
		resp := b.open(t, base+"?msg=bare")
		body := b.eval(t, `document.body.innerText`)
		if resp.Status != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
			t.Fatalf("the bare URL answered %d with %q, want 401 unauthorized", resp.Status, body)
		}
	})

	t.Run("a signed URL opens the page, its WebSocket echoes", func(t *testing.T) {
		tok := r.preview(t, r.a, appPort).Token
		resp := b.open(t, base+"?msg=from-the-browser&"+api.PreviewTokenParam+"="+url.QueryEscape(tok))
		if resp.Status != http.StatusOK {
			t.Fatalf("the signed URL ended in %d, want 200", resp.Status)
		}
		if got := b.echo(t); got != "echo:"+reverse("from-the-browser") {
			t.Fatalf("the page shows %q, want the app's echo %q", got, "echo:"+reverse("from-the-browser"))
		}
		// The token left the address bar, and the page cannot read the
		// cookie that carries it.
		if loc := b.eval(t, `location.href`); loc != base+"?msg=from-the-browser" {
			t.Fatalf("the page is at %q, want %q", loc, base+"?msg=from-the-browser")
		}
		if c := b.eval(t, `document.cookie`); strings.Contains(c, "withruntime_preview") || strings.Contains(c, tok) {
			t.Fatalf("the page reads the preview cookie: %q", c)
		}
		// The page's own script came with the cookie, and the page is of
		// the preview's origin.
		if got := b.eval(t, `document.getElementById("script").textContent`); got != "loaded" {
			t.Fatalf("the page's app.js: %q", got)
		}
		if got := b.eval(t, `self.origin`); got != "http://"+r.host(r.a, appPort) {
			t.Fatalf("the page's origin is %q, want http://%s", got, r.host(r.a, appPort))
		}
		// Another port of the same sandbox is another origin the cookie
		// does not open.
		resp = b.open(t, fmt.Sprintf("http://%s/", r.host(r.a, silentPort)))
		if resp.Status != http.StatusUnauthorized {
			t.Fatalf("another port with the cookie of this one: %d, want 401", resp.Status)
		}
	})

	t.Run("another preview's page cannot ride on the cookie", func(t *testing.T) {
		// A's cookie is in the browser (above). B's page, public, opens a
		// WebSocket to A. Under localhost each preview host is a site of
		// its own to Chromium, which withholds A's SameSite=Lax cookie
		// itself; under a real preview domain they are one site and the
		// browser sends it: the server's refusal of the handshake's
		// foreign Origin is checked in "a signed URL sets a cookie".
		setPublic(t, r, r.b, true)
		defer setPublic(t, r, r.b, false)
		target := "ws://" + r.host(r.a, appPort) + "/ws"
		evil := "http://" + r.host(r.b, appPort) + "/?msg=steal&ws=" + url.QueryEscape(target)
		if resp := b.open(t, evil); resp.Status != http.StatusOK {
			t.Fatalf("B's public page answered %d", resp.Status)
		}
		if got := b.echo(t); got != "closed" {
			t.Fatalf("B's page reached A's WebSocket with A's cookie: %q", got)
		}
		// The same page reaches A once A is public: what stopped it was
		// the cookie refused, not the browser.
		setPublic(t, r, r.a, true)
		defer setPublic(t, r, r.a, false)
		b.open(t, evil)
		if got := b.echo(t); got != "echo:"+reverse("steal") {
			t.Fatalf("B's page and A public: %q, want the echo", got)
		}
	})

	t.Run("the path form: an opaque origin", func(t *testing.T) {
		tok := r.preview(t, r.a, appPort).Token
		pathURL := fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d/", r.s.URL, r.a, appPort)
		if resp := b.open(t, pathURL+"?msg=path&"+api.PreviewTokenParam+"="+url.QueryEscape(tok)); resp.Status != http.StatusOK {
			t.Fatalf("the path form's signed URL ended in %d", resp.Status)
		}
		if got := b.eval(t, `self.origin`); got != "null" {
			t.Fatalf("a page of the path form has the origin %q, want an opaque one (null): it could script the API's origin", got)
		}
		// What an opaque origin asks for is cross-site: the browser sends
		// no Lax cookie with it, and a cookie would not open the preview
		// for it anyway. So a private port's page in the path form is its
		// document only (the host form is the browser's form); this holds
		// as long as the page is sandboxed.
		if got, echoed := b.eval(t, `document.getElementById("script").textContent`), b.echo(t); got != "not loaded" || echoed != "closed" {
			t.Fatalf("the sandboxed page's own requests went through on the cookie: app.js %q, WebSocket %q", got, echoed)
		}
		// A public port needs no cookie: the whole app works in the path
		// form, still in its opaque origin.
		setPublic(t, r, r.a, true)
		defer setPublic(t, r, r.a, false)
		if resp := b.open(t, pathURL+"?msg=path"); resp.Status != http.StatusOK {
			t.Fatalf("the public path form answered %d", resp.Status)
		}
		if got := b.echo(t); got != "echo:"+reverse("path") {
			t.Fatalf("the public path form's WebSocket: %q", got)
		}
		if got, origin := b.eval(t, `document.getElementById("script").textContent`), b.eval(t, `self.origin`); got != "loaded" || origin != "null" {
			t.Fatalf("the public path form: app.js %q, origin %q; want loaded, null", got, origin)
		}
	})

	t.Run("public: the bare URL opens", func(t *testing.T) {
		b.clearCookies(t)
		setPublic(t, r, r.a, true)
		defer setPublic(t, r, r.a, false)
		if resp := b.open(t, base+"?msg=public"); resp.Status != http.StatusOK {
			t.Fatalf("the public bare URL answered %d, want 200", resp.Status)
		}
		if got := b.echo(t); got != "echo:"+reverse("public") {
			t.Fatalf("the page shows %q, want %q", got, "echo:"+reverse("public"))
		}
	})
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// setPublic makes port appPort of id public or private.
func setPublic(t *testing.T, r *previewRig, id string, public bool) {
	t.Helper()
	status, body := call(t, r.s, r.s.Key, http.MethodPut, fmt.Sprintf("/v1/sandboxes/%s/previews/%d", id, appPort), strings.NewReader(fmt.Sprintf(`{"public":%v}`, public)))
	if status != http.StatusOK {
		t.Fatalf("PUT public=%v: %d %s", public, status, body)
	}
}

// TestPreviewSameSite is the attack SameSite=Lax does not stop: under a
// preview domain that is not a public suffix (any real one), every
// preview host is one site, so a page of another account's public
// preview makes the victim's browser send the victim's preview cookie
// with what it asks of the victim's preview. Real Chromium, with
// *.preview.test mapped to loopback, against the host form on a listener
// of its own (--preview-listen), which serves nothing but previews.
func TestPreviewSameSite(t *testing.T) {
	requireChromium(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r := startPreviewRig(t, "preview.test", addr, "--preview-listen", addr)
	acct, err := r.c.CreateAccount(t.Context(), api.CreateAccountRequest{Name: "attacker"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := r.c.CreateKey(t.Context(), api.CreateKeyRequest{Account: acct.ID})
	if err != nil {
		t.Fatal(err)
	}
	ids := r.startApps(t, r.s.Key, key.Secret)
	victim, attacker := ids[0], ids[1]

	// The preview listener: previews only, and the URLs name it.
	for _, path := range []string{"/v1/health", fmt.Sprintf("/v1/sandboxes/%s/ports/%d/", victim, appPort)} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+r.s.Key)
		r.expect(t, req, http.StatusNotFound, "not_found")
	}
	p := r.preview(t, victim, appPort)
	if want := "http://" + r.host(victim, appPort) + "/"; p.URL != want {
		t.Fatalf("the preview's URL is %q, want %q", p.URL, want)
	}
	r.expect(t, r.hostReq(victim, appPort, "/", "key"), http.StatusOK, "")

	// The attacker makes its own port public, and cannot touch the
	// victim's.
	put := func(id, key string) int {
		req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v1/sandboxes/%s/previews/%d", r.s.URL, id, appPort), strings.NewReader(`{"public":true}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, _ := r.do(t, req)
		return resp.StatusCode
	}
	if st := put(victim, key.Secret); st != http.StatusNotFound {
		t.Fatalf("the attacker made the victim's port public: %d", st)
	}
	if st := put(attacker, key.Secret); st != http.StatusOK {
		t.Fatalf("the attacker's own port: %d", st)
	}

	b := startBrowser(t, chromedp.Flag("host-resolver-rules", "MAP *.preview.test 127.0.0.1"))
	// The victim opens its preview's signed URL: its cookie is in the
	// browser, and its page works.
	if resp := b.open(t, "http://"+r.host(victim, appPort)+"/?msg=mine&"+api.PreviewTokenParam+"="+url.QueryEscape(p.Token)); resp.Status != http.StatusOK {
		t.Fatalf("the victim's signed URL ended in %d", resp.Status)
	}
	if got := b.echo(t); got != "echo:"+reverse("mine") {
		t.Fatalf("the victim's page: %q", got)
	}
	// Then visits the attacker's public page, which opens a WebSocket to
	// the victim's preview: the browser sends the victim's cookie (same
	// site), the handshake's Origin is the attacker's.
	target := "ws://" + r.host(victim, appPort) + "/ws"
	if resp := b.open(t, "http://"+r.host(attacker, appPort)+"/?msg=steal&ws="+url.QueryEscape(target)); resp.Status != http.StatusOK {
		t.Fatalf("the attacker's page answered %d", resp.Status)
	}
	if got := b.echo(t); got != "closed" {
		t.Fatalf("the attacker's page talked to the victim's private WebSocket with the victim's cookie: %q", got)
	}
	// The same page's own WebSocket works: the refusal was the victim's.
	if resp := b.open(t, "http://"+r.host(attacker, appPort)+"/?msg=own"); resp.Status != http.StatusOK {
		t.Fatalf("the attacker's page answered %d", resp.Status)
	}
	if got := b.echo(t); got != "echo:"+reverse("own") {
		t.Fatalf("the attacker's own WebSocket: %q", got)
	}
}
