package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// browser is an HTTP client that keeps cookies and follows redirects, as a
// browser does, and reaches every host name at addr: the host form's
// names under localhost resolve to loopback in browsers, not in Go's
// resolver.
func browser(addr string) *http.Client {
	jar, _ := cookiejar.New(nil)
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}},
	}
}

func getPage(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPreviewCLI drives "sandbox preview-url", "expose" and
// "preview-revoke" against a server that serves the host form under
// localhost, as the local daemon does, with python's http.server in a real
// sandbox, and opens what they print with a real HTTP client.
func TestPreviewCLI(t *testing.T) {
	s := testenv.StartServer(t, "--preview-domain", "localhost")
	env := s.Env()
	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "1024", "--timeout", "15m")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errs)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { cli(t, env, "sandbox", "stop", id) })
	if _, errs, code := cli(t, env, "sandbox", "exec", id, "--", "sh", "-c",
		"mkdir -p /tmp/www && echo preview-page-$((6*7)) > /tmp/www/index.html"); code != 0 {
		t.Fatalf("exec: exit %d: %s", code, errs)
	}
	if _, errs, code := cli(t, env, "sandbox", "exec", "-d", id, "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/tmp/www"); code != 0 {
		t.Fatalf("exec -d: exit %d: %s", code, errs)
	}
	if _, errs, code := cli(t, env, "sandbox", "exec", id, "--", "python3", "-c",
		"import time, urllib.request as u\nfor _ in range(300):\n  try: u.urlopen('http://127.0.0.1:8000/'); break\n  except OSError: time.sleep(0.1)\nelse: raise SystemExit(1)"); code != 0 {
		t.Fatalf("http.server did not start: %s", errs)
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	hostURL := "http://8000-" + id + ".localhost:" + port + "/"
	const page = "preview-page-42\n"

	// preview-url: the host form, signed.
	out, errs, code = cli(t, env, "sandbox", "preview-url", id, "8000")
	signedRe := regexp.MustCompile(`^` + regexp.QuoteMeta(hostURL) + `\?withruntime_preview_token=(wrpt_[A-Za-z0-9_.%-]+)\n$`)
	m := signedRe.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("preview-url: exit %d stdout %q stderr %q, want %s", code, out, errs, signedRe)
	}
	signed := strings.TrimSpace(out)
	if strings.Contains(signed, s.Key) {
		t.Fatal("the signed URL carries the API key")
	}
	b := browser(s.Addr)
	if status, body := getPage(t, b, signed); status != 200 || body != page {
		t.Fatalf("the signed URL: %d %q, want 200 and the page", status, body)
	}
	// The cookie alone, later.
	if status, body := getPage(t, b, hostURL+"index.html"); status != 200 || body != page {
		t.Fatalf("with the signed URL's cookie: %d %q", status, body)
	}
	// No token, no key: refused.
	if status, body := getPage(t, browser(s.Addr), hostURL+"index.html"); status != 401 && status != 403 {
		t.Fatalf("no token: %d %q, want 401 or 403", status, body)
	}

	// --json and --expires-in.
	out, errs, code = cli(t, env, "sandbox", "preview-url", id, "8000", "--expires-in", "2h", "--json")
	var p api.Preview
	if err := json.Unmarshal([]byte(out), &p); code != 0 || err != nil {
		t.Fatalf("preview-url --json: exit %d %q %s (%v)", code, out, errs, err)
	}
	if p.Port != 8000 || p.Public || p.URL != hostURL || p.Host != "8000-"+id+".localhost:"+port ||
		p.Path != "/v1/sandboxes/"+id+"/ports/8000/" || !strings.HasPrefix(p.Token, "wrpt_") || p.ExpiresAt == nil {
		t.Fatalf("preview-url --json: %+v", p)
	}
	if left := time.Until(*p.ExpiresAt); left < 119*time.Minute || left > 121*time.Minute {
		t.Fatalf("--expires-in 2h: the token expires in %s", left)
	}
	if _, errs, code := cli(t, env, "sandbox", "preview-url", id, "8000", "--expires-in", "10s"); code != 1 || !strings.HasPrefix(errs, "error: invalid_request: ") {
		t.Fatalf("--expires-in 10s: exit %d %q, want 1 and invalid_request", code, errs)
	}

	// expose: public, no token; --private: a token again.
	out, errs, code = cli(t, env, "sandbox", "expose", id, "8000")
	if code != 0 || out != hostURL+"\n" {
		t.Fatalf("expose: exit %d stdout %q stderr %q, want %q", code, out, errs, hostURL)
	}
	if status, body := getPage(t, browser(s.Addr), hostURL+"index.html"); status != 200 || body != page {
		t.Fatalf("public, no token: %d %q", status, body)
	}
	out, errs, code = cli(t, env, "sandbox", "expose", id, "8000", "--private")
	if code != 0 || !signedRe.MatchString(out) {
		t.Fatalf("expose --private: exit %d stdout %q stderr %q", code, out, errs)
	}
	if status, body := getPage(t, browser(s.Addr), hostURL+"index.html"); status != 401 && status != 403 {
		t.Fatalf("private again, no token: %d %q", status, body)
	}

	// preview-revoke: the old signed URL and its cookie stop working.
	out, errs, code = cli(t, env, "sandbox", "preview-revoke", id)
	if code != 0 || out != id+"\n" {
		t.Fatalf("preview-revoke: exit %d stdout %q stderr %q", code, out, errs)
	}
	if status, body := getPage(t, b, hostURL+"index.html"); status != 401 && status != 403 {
		t.Fatalf("the cookie after the revoke: %d %q", status, body)
	}
	if status, body := getPage(t, browser(s.Addr), signed); status != 401 && status != 403 {
		t.Fatalf("the old signed URL after the revoke: %d %q", status, body)
	}
	out, _, _ = cli(t, env, "sandbox", "preview-url", id, "8000")
	if status, body := getPage(t, browser(s.Addr), strings.TrimSpace(out)); status != 200 || body != page {
		t.Fatalf("a new signed URL after the revoke: %d %q", status, body)
	}

	// Refusals.
	if _, errs, code := cli(t, env, "sandbox", "preview-url", "sbx_nosuchsandbox", "8000"); code != 1 || !strings.HasPrefix(errs, "error: not_found: ") {
		t.Fatalf("preview-url of no sandbox: exit %d %q", code, errs)
	}
	if _, errs, code := cli(t, env, "sandbox", "preview-revoke", "sbx_nosuchsandbox"); code != 1 || !strings.HasPrefix(errs, "error: not_found: ") {
		t.Fatalf("preview-revoke of no sandbox: exit %d %q", code, errs)
	}
}
