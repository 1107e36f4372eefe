package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// TestPreviewCookieOrigin: a preview's cookie opens only requests of the
// preview's own origin. A WebSocket handshake has no Sec-Fetch-Site in
// Chromium but always an Origin; under a preview domain that is not a
// public suffix, another preview's page is the same site and its
// requests carry the cookie, so the Origin decides. (test/e2e's
// TestPreviewSameSite is the same attack in a real browser.)
func TestPreviewCookieOrigin(t *testing.T) {
	e, _ := previewEnv(t)
	srv := httptest.NewServer(PreviewHandler(e.handler))
	t.Cleanup(srv.Close)
	p := e.preview("sbx-1", "8000")
	host := "8000-sbx-1.preview.test:8443"
	cookie := previewCookie + "=" + p.Token
	send := func(h map[string]string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/echo/x", nil)
		req.Host = host
		req.Header.Set("Cookie", cookie)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	wantPreviewStatus(t, "the cookie alone", send(nil), 200, "")
	wantPreviewStatus(t, "the preview's own origin", send(map[string]string{"Origin": "http://" + host}), 200, "")
	wantPreviewStatus(t, "the own origin over TLS, as a proxy in front serves it", send(map[string]string{"Origin": "https://" + host, "Sec-Fetch-Site": "same-origin"}), 200, "")
	for _, origin := range []string{
		"http://8000-sbx-2.preview.test:8443", // another preview: the same site
		"http://8001-sbx-1.preview.test:8443", // another port of the same sandbox
		"http://8000-sbx-1.preview.test",      // another port of the host
		"null",                                // a sandboxed page (the path form's)
		"http://elsewhere.example",
		"http://8000-sbx-1.preview.test:8443/path",
		"http://user@8000-sbx-1.preview.test:8443",
	} {
		// As a WebSocket handshake comes: no Sec-Fetch-Site.
		wantPreviewStatus(t, "Origin "+origin, send(map[string]string{"Origin": origin, "Connection": "Upgrade", "Upgrade": "websocket"}), 401, "unauthorized")
	}
	// The Origin binds the cookie only: a token header or a key is no
	// ambient credential, and a public port needs none.
	req := map[string]string{"Origin": "http://elsewhere.example", api.PreviewTokenHeader: p.Token, "Cookie": ""}
	wantPreviewStatus(t, "a token header from another origin", send(req), 200, "")
	// The path form: a page there is sandboxed (Origin null) and the API's
	// own origin serves no page that would send the cookie.
	path := "/v1/sandboxes/sbx-1/ports/8000/echo/x"
	resp := e.get(path+"?"+api.PreviewTokenParam+"="+url.QueryEscape(p.Token), nil)
	wantPreviewStatus(t, "the path form's signed URL", resp, http.StatusSeeOther, "")
	wantPreviewStatus(t, "the path form, Origin null", e.get(path, map[string]string{"Cookie": cookie, "Origin": "null"}), 401, "unauthorized")
	wantPreviewStatus(t, "the path form, a navigation", e.get(path, map[string]string{"Cookie": cookie}), 200, "")
}
