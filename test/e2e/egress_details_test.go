package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// closeDelimitedBody is what /close-delimited answers for the
// Authorization header auth: large enough for many TLS records.
func closeDelimitedBody(auth string) string {
	return "authorization=" + auth + "\n" + strings.Repeat("0123456789abcdef\n", 12<<10) + "end\n"
}

// closeDelimited answers without Content-Length or chunks, the body ended
// by closing the connection: as HTTP/1.0 (or with ?proto=1.1, as an
// HTTP/1.1 server may).
func closeDelimited(w http.ResponseWriter, r *http.Request) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "no HTTP/1.x connection to take over", http.StatusInternalServerError)
		return
	}
	c, _, err := hj.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	proto := "HTTP/1.0"
	if r.URL.Query().Get("proto") == "1.1" {
		proto = "HTTP/1.1"
	}
	fmt.Fprintf(c, "%s 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n%s", proto, closeDelimitedBody(r.Header.Get("Authorization")))
}

// TestEgressDetails: through the secret-swapping proxy, a response whose
// body ends with the upstream's close reaches curl whole (HTTP/1.1 and
// HTTP/1.0 clients, HTTP/1.0 and HTTP/1.1 upstreams), with the secret's
// echo scrubbed; and an allowed name whose lookup fails is in the
// sandbox's egress log.
func TestEgressDetails(t *testing.T) { forIsolations(t, testEgressDetails) }

func testEgressDetails(t *testing.T, isolation string, flags ...string) {
	u := newUpstreams(t)
	s := testenv.StartServer(t, append(u.serverFlags(), flags...)...)
	r := &recorder{s: s, isolation: isolation}
	value := newSecretValue()
	if out, errs, code := r.cli(t, value, "secrets", "set", "OPENAI_API_KEY", "--host", "api.openai.test"); code != 0 {
		t.Fatalf("secrets set: exit %d %q %q", code, out, errs)
	}
	b := newBox(t, r, `{"internet":true,"allow":["api.openai.test","metadata.example.test"]}`, u.CAPEM)
	ph := b.sh(t, `printf %s "$OPENAI_API_KEY"`).Out
	if !strings.HasPrefix(ph, "wrsec_") {
		t.Fatalf("the sandbox's OPENAI_API_KEY is %q, want a placeholder", ph)
	}
	sum := sha256.Sum256([]byte(closeDelimitedBody("Bearer " + ph)))
	want := hex.EncodeToString(sum[:])

	for _, tc := range []struct{ name, curlArgs, query string }{
		{"HTTP/1.1 client, HTTP/1.0 upstream", "", ""},
		{"HTTP/1.0 client, HTTP/1.0 upstream", "--http1.0", ""},
		{"HTTP/1.1 client, HTTP/1.1 upstream", "", "?proto=1.1"},
		{"HTTP/1.0 client, HTTP/1.1 upstream", "--http1.0", "?proto=1.1"},
	} {
		t.Run("a close-delimited answer, "+tc.name, func(t *testing.T) {
			m, lm := u.mark(), b.logMark(t)
			res := b.sh(t, `curl -sS --connect-timeout 5 -m 30 `+tc.curlArgs+` -H "Authorization: Bearer $OPENAI_API_KEY" -o /workspace/cd https://api.openai.test/close-delimited`+tc.query+
				`; echo "exit $?"; head -n 1 /workspace/cd; sha256sum < /workspace/cd; rm -f /workspace/cd`)
			lines := strings.Split(strings.TrimSpace(res.Out), "\n")
			if len(lines) != 3 || lines[0] != "exit 0" {
				t.Fatalf("curl: %s", res)
			}
			if lines[1] != "authorization=Bearer "+ph {
				t.Errorf("the echo the sandbox saw: %q, want the placeholder", lines[1])
			}
			if got := strings.Fields(lines[2])[0]; got != want {
				t.Errorf("body sha256 %s, want %s (the whole body, scrubbed)", got, want)
			}
			got := u.requestsSince(m, at(upOpenAI))
			if len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+value || got[0].Path != "/close-delimited" {
				t.Fatalf("the upstream got %+v, want one request with the value", got)
			}
			b.expectEvent(t, lm, "api.openai.test", "allowed", "TLS terminated")
		})
	}

	t.Run("an allowed name whose lookup fails is logged", func(t *testing.T) {
		// The hosts file names metadata.example.test at 169.254.169.254,
		// which the resolver never hands out: a failed lookup that asks
		// no resolver outside the test.
		lm := b.logMark(t)
		if _, res := b.curl(t, "http://metadata.example.test/"); res.Code != 6 {
			t.Fatalf("curl metadata.example.test: %s, want exit 6 (not resolved)", res)
		}
		ev := b.expectEvent(t, lm, "metadata.example.test", "allowed", "lookup failed: ")
		if ev.Kind != "dns" || ev.Port != 53 || ev.Address != "" {
			t.Fatalf("egress event %+v, want a DNS answer with no address", ev)
		}
	})
}
