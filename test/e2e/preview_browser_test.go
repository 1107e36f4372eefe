package e2e

import (
	"context"
	"fmt"
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
func browserPreview(t *testing.T, r *previewRig) {
	if _, err := os.Stat(chromiumPath); err != nil {
		// Not a skip: a missing browser must not pass for a working preview.
		t.Fatalf("%s is missing: scripts/test.sh installs it (apt-get install chromium): %v", chromiumPath, err)
	}
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
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
	)
	defer cancel()
	// The browser lives as long as this context: no timeout on it (see
	// chromedp.Run); each step gets its own below.
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	step := func(a chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 45*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// open navigates to u and returns the document's answer.
	open := func(u string) *network.Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 45*time.Second)
		defer cancel()
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
		if err != nil {
			t.Fatalf("opening %s: %v", u, err)
		}
		return resp
	}
	// echo waits for the page's echo and returns it.
	echo := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 45*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Poll[string](`document.getElementById("echo") && document.getElementById("echo").textContent`))
		if err != nil {
			status, _ := chromedp.Run(browser, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			t.Fatalf("the page never showed the echo: %v (page: %q)", err, status)
		}
		return got
	}
	eval := func(expr string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 45*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	base := "http://" + r.host(r.a, appPort) + "/"

	t.Run("the bare URL is refused", func(t *testing.T) {
		resp := open(base + "?msg=bare")
		body := eval(`document.body.innerText`)
		if resp.Status != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
			t.Fatalf("the bare URL answered %d with %q, want 401 unauthorized", resp.Status, body)
		}
	})

	t.Run("a signed URL opens the page, its WebSocket echoes", func(t *testing.T) {
		tok := r.preview(t, r.a, appPort).Token
		resp := open(base + "?msg=from-the-browser&" + api.PreviewTokenParam + "=" + url.QueryEscape(tok))
		if resp.Status != http.StatusOK {
			t.Fatalf("the signed URL ended in %d, want 200", resp.Status)
		}
		if got := echo(); got != "echo:"+reverse("from-the-browser") {
			t.Fatalf("the page shows %q, want the app's echo %q", got, "echo:"+reverse("from-the-browser"))
		}
		// The token left the address bar, and the page cannot read the
		// cookie that carries it.
		if loc := eval(`location.href`); loc != base+"?msg=from-the-browser" {
			t.Fatalf("the page is at %q, want %q", loc, base+"?msg=from-the-browser")
		}
		if c := eval(`document.cookie`); strings.Contains(c, "withruntime_preview") || strings.Contains(c, tok) {
			t.Fatalf("the page reads the preview cookie: %q", c)
		}
		// Another port of the same sandbox is another origin the cookie
		// does not open.
		resp = open(fmt.Sprintf("http://%s/", r.host(r.a, silentPort)))
		if resp.Status != http.StatusUnauthorized {
			t.Fatalf("another port with the cookie of this one: %d, want 401", resp.Status)
		}
	})

	t.Run("public: the bare URL opens", func(t *testing.T) {
		step(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
			return err
		}))
		status, body := call(t, r.s, r.s.Key, http.MethodPut, fmt.Sprintf("/v1/sandboxes/%s/previews/%d", r.a, appPort), strings.NewReader(`{"public":true}`))
		if status != http.StatusOK {
			t.Fatalf("PUT public: %d %s", status, body)
		}
		defer call(t, r.s, r.s.Key, http.MethodPut, fmt.Sprintf("/v1/sandboxes/%s/previews/%d", r.a, appPort), strings.NewReader(`{"public":false}`))
		if resp := open(base + "?msg=public"); resp.Status != http.StatusOK {
			t.Fatalf("the public bare URL answered %d, want 200", resp.Status)
		}
		if got := echo(); got != "echo:"+reverse("public") {
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
