package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the standard library only.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd())
}

// TestServes: the page and its assets, each with the console's headers,
// the page naming only assets that are served; the rest goes to next.
func TestServes(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Next", "1")
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(Mount(next))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	get := func(t *testing.T, method, path string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	for _, tc := range []struct {
		name, method, path string
		status             int
		typ, contains      string
	}{
		{"page", "GET", "/console/", 200, "text/html; charset=utf-8", `<script src="console.js" defer></script>`},
		{"script", "GET", "/console/console.js", 200, "text/javascript; charset=utf-8", "withruntime.bearer."},
		{"style", "GET", "/console/console.css", 200, "text/css; charset=utf-8", ".xterm"},
		{"head", "HEAD", "/console/console.js", 200, "text/javascript; charset=utf-8", ""},
		{"bare prefix redirects", "GET", "/console", 301, "", ""},
		{"unknown asset", "GET", "/console/nope.js", 404, "", ""},
		{"no listing, no traversal", "GET", "/console/../console/assets/", 404, "", ""},
		{"index.html is the page's path only", "GET", "/console/index.html", 404, "", ""},
		{"no writes", "POST", "/console/", 405, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, tc.method, tc.path)
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.status)
			}
			h := resp.Header
			for k, want := range map[string]string{
				"Content-Security-Policy": CSP,
				"X-Frame-Options":         "DENY",
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
			} {
				if got := h.Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
			if tc.typ != "" && h.Get("Content-Type") != tc.typ {
				t.Errorf("Content-Type: got %q, want %q", h.Get("Content-Type"), tc.typ)
			}
			if !strings.Contains(body, tc.contains) {
				t.Errorf("the body lacks %q", tc.contains)
			}
			if len(h.Values("Set-Cookie")) > 0 {
				t.Errorf("a cookie is set: %q", h.Values("Set-Cookie"))
			}
			if tc.status == 301 && h.Get("Location") != Prefix {
				t.Errorf("Location: got %q, want %q", h.Get("Location"), Prefix)
			}
		})
	}

	t.Run("the policy is strict", func(t *testing.T) {
		for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
			if !strings.Contains(CSP, want) {
				t.Errorf("the CSP lacks %q: %s", want, CSP)
			}
		}
		if strings.Contains(strings.Split(strings.Split(CSP, "script-src")[1], ";")[0], "unsafe") {
			t.Errorf("scripts may be inline or evaluated: %s", CSP)
		}
	})

	t.Run("no inline script in the page", func(t *testing.T) {
		_, body := get(t, "GET", "/console/")
		if strings.Count(body, "<script") != 1 || !strings.Contains(body, `<script src="console.js"`) || regexp.MustCompile(`(?i)\son[a-z]+=`).MatchString(body) {
			t.Fatalf("the page has inline script: %s", body)
		}
	})

	t.Run("gzip for those who take it", func(t *testing.T) {
		_, plain := get(t, "GET", "/console/console.js") // Go's client asks gzip and unpacks it
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/console/console.js", nil)
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != "" || string(raw) != plain || len(plain) < 1000 {
			t.Fatalf("identity: encoding %q, %d bytes, want the %d bytes unpacked", resp.Header.Get("Content-Encoding"), len(raw), len(plain))
		}
		req.Header.Set("Accept-Encoding", "gzip")
		tr := &http.Transport{DisableCompression: true}
		resp, err = (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		zipped, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != "gzip" || len(zipped) >= len(plain)/2 {
			t.Fatalf("gzip: encoding %q, %d bytes of %d", resp.Header.Get("Content-Encoding"), len(zipped), len(plain))
		}
	})

	t.Run("revalidation", func(t *testing.T) {
		resp, _ := get(t, "GET", "/console/console.js")
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/console/console.js", nil)
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		r2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r2.Body.Close()
		if resp.Header.Get("ETag") == "" || r2.StatusCode != http.StatusNotModified {
			t.Fatalf("ETag %q, then %d, want 304", resp.Header.Get("ETag"), r2.StatusCode)
		}
	})

	t.Run("everything else is next's", func(t *testing.T) {
		for _, p := range []string{"/v1/sandboxes", "/consoles", "/", "/sdk/"} {
			resp, _ := get(t, "GET", p)
			if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Next") != "1" || resp.Header.Get("Content-Security-Policy") != "" {
				t.Fatalf("%s: got %d with %v, want next's answer", p, resp.StatusCode, resp.Header)
			}
		}
	})
}
