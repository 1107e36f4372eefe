package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// secretPrefix starts every test secret's value: public, so that a
// scanner in the sandbox can find candidates and compare their SHA-256
// without ever being given a value.
const secretPrefix = "sk-e2e-"

func newSecretValue() string {
	var b [20]byte
	rand.Read(b[:])
	return secretPrefix + hex.EncodeToString(b[:])
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

type scanAnswer struct {
	Hits         [][2]string // digest, where ("file:PATH", "environ:PID", "cmdline:PID", "mem:PID")
	FilesChecked int         `json:"files_checked"`
	Procs        int
	MemRegions   int `json:"mem_regions"`
	MemBytes     int `json:"mem_bytes"`
	MemErrors    int `json:"mem_errors"`
}

// TestSecrets covers host-bound secrets end to end: stored through the
// CLI, seen by sandboxes as placeholders only, swapped in by the egress
// proxy on HTTPS requests to the bound host only, and never written
// anywhere else.
func TestSecrets(t *testing.T) { forIsolations(t, testSecrets) }

func testSecrets(t *testing.T, isolation string, flags ...string) {
	u := newUpstreams(t)
	s := testenv.StartServer(t, append(u.serverFlags(), flags...)...)
	r := &recorder{s: s, isolation: isolation}
	value, value2, badValue := newSecretValue(), newSecretValue(), newSecretValue()
	values := []string{value, value2, badValue}

	setSecret := func(t *testing.T, name, host, v string) {
		t.Helper()
		out, errs, code := r.cli(t, v, "secrets", "set", name, "--host", host)
		if code != 0 || out != "" {
			t.Fatalf("secrets set %s: exit %d %q %q", name, code, out, errs)
		}
	}
	setSecret(t, "OPENAI_API_KEY", "api.openai.test", value)
	setSecret(t, "BADCERT_KEY", "badcert.example.test", badValue)
	out, errs, code := r.cli(t, "", "secrets", "ls")
	if code != 0 || !strings.Contains(out, "OPENAI_API_KEY") || !strings.Contains(out, "api.openai.test") ||
		!strings.Contains(out, "BADCERT_KEY") || !strings.Contains(out, "badcert.example.test") {
		t.Fatalf("secrets ls: exit %d %q %q", code, out, errs)
	}

	b := newBox(t, r, `{"internet":true,"allow":["api.openai.test","allowed.example.test","badcert.example.test"]}`, u.CAPEM)
	b.noProxyVariables(t)
	// A process started now keeps the environment it started with.
	if st, data := r.call(t, "POST", "/v1/sandboxes/"+b.ID+"/exec", strings.NewReader(`{"cmd":"sleep 600","background":true}`)); st != 201 {
		t.Fatalf("background exec: %d %s", st, data)
	}
	ph := b.sh(t, `printf %s "$OPENAI_API_KEY"`).Out
	if !strings.HasPrefix(ph, "wrsec_") || strings.Contains(ph, value) {
		t.Fatalf("the sandbox's OPENAI_API_KEY is %q, want a placeholder", ph)
	}
	badPh := b.sh(t, `printf %s "$BADCERT_KEY"`).Out
	if badPh == "" || badPh == ph {
		t.Fatalf("BADCERT_KEY placeholder %q", badPh)
	}

	// authAt returns the Authorization headers the upstream at addr got
	// since mark.
	authAt := func(mark int, addr string) []string {
		var out []string
		for _, q := range u.requestsSince(mark, at(addr)) {
			out = append(out, q.Header.Get("Authorization"))
		}
		return out
	}
	// echo runs curl with headers and prints the response's headers and
	// body.
	curlEcho := func(t *testing.T, args string) result {
		t.Helper()
		return b.sh(t, `curl -sS --connect-timeout 5 -m 15 -D - -H "Authorization: Bearer $OPENAI_API_KEY" `+args)
	}

	t.Run("the sandbox sees a placeholder, never the value", func(t *testing.T) {
		res := b.sh(t, "env")
		if !strings.Contains(res.Out, "OPENAI_API_KEY="+ph+"\n") || !strings.Contains(res.Out, "BADCERT_KEY="+badPh+"\n") {
			t.Fatalf("env: %s", res)
		}
		res = b.sh(t, `sudo sh -c 'cat /proc/[0-9]*/environ' | tr '\0' '\n' | grep -c "^OPENAI_API_KEY=`+ph+`$"`)
		if strings.TrimSpace(res.Out) == "0" {
			t.Fatalf("no process has the placeholder in its environment: %s", res)
		}
	})

	t.Run("the bound upstream receives the value over HTTPS, the sandbox trusting the platform", func(t *testing.T) {
		m, lm := u.mark(), b.logMark(t)
		res := curlEcho(t, "-d 'hello body' https://api.openai.test/echo")
		if res.Code != 0 || !strings.Contains(res.Out, "HTTP/1.1 200") {
			t.Fatalf("curl: %s", res)
		}
		if got := authAt(m, upOpenAI); len(got) != 1 || got[0] != "Bearer "+value {
			t.Fatalf("the upstream got Authorization %q, want the value", got)
		}
		q := u.requestsSince(m, at(upOpenAI))[0]
		if q.SNI != "api.openai.test" || q.Scheme != "https" || q.Body != "hello body" {
			t.Fatalf("upstream saw %+v", q)
		}
		// The echo comes back with the placeholder, in the header and in
		// the uncompressed body.
		if !strings.Contains(res.Out, "X-Echo-Authorization: Bearer "+ph+"\r\n") || !strings.Contains(res.Out, "authorization=Bearer "+ph+"\n") {
			t.Fatalf("the echo the sandbox saw: %s", res)
		}
		// Streamed in pieces that split the value, it is still caught.
		res = curlEcho(t, "https://api.openai.test/echo-split")
		if !strings.Contains(res.Out, "\r\n\r\nauthorization=Bearer "+ph+"\n") {
			t.Fatalf("the split echo the sandbox saw: %s", res)
		}
		ev := b.expectEvent(t, lm, "api.openai.test", "allowed", "TLS terminated")
		if ev.Address != upOpenAI || ev.Port != 443 {
			t.Fatalf("egress event %+v", ev)
		}
		// Only the platform's authority vouches for the connection: with
		// nothing but the upstream's CA, curl does not trust it.
		if res := b.sh(t, "curl -sS -m 10 --cacert /workspace/test-ca.pem https://api.openai.test/ -o /dev/null"); res.Code != 60 {
			t.Fatalf("with the upstream's CA only: %s, want exit 60", res)
		}
		// The proxy offers HTTP/1.1 only, even to a client asking for h2.
		if res := b.sh(t, `curl -sS -m 10 --http2 -o /dev/null -w '%{http_version}' https://api.openai.test/`); res.Out != "1.1" {
			t.Fatalf("curl --http2: %s, want HTTP/1.1", res)
		}
	})

	t.Run("Python trusts the platform too", func(t *testing.T) {
		m := u.mark()
		var a struct {
			httpResponse
			Lib string
		}
		res := b.sh(t, `python3 /workspace/probe.py pyhttps https://api.openai.test/echo "{\"Authorization\": \"Bearer $OPENAI_API_KEY\"}"`)
		if json.Unmarshal([]byte(res.Out), &a) != nil || a.Status != 200 || !strings.Contains(a.Body, "authorization=Bearer "+ph) || a.Headers["X-Echo-Authorization"] != "Bearer "+ph {
			t.Fatalf("python: %s", res)
		}
		t.Logf("with Python's %s", a.Lib)
		if got := authAt(m, upOpenAI); len(got) != 1 || got[0] != "Bearer "+value {
			t.Fatalf("the upstream got %q", got)
		}
	})

	t.Run("never swapped: another host, plain HTTP, body and query", func(t *testing.T) {
		m := u.mark()
		if res := curlEcho(t, "--cacert /workspace/test-ca.pem https://allowed.example.test/echo"); !strings.Contains(res.Out, "HTTP/2 200") && !strings.Contains(res.Out, "HTTP/1.1 200") {
			t.Fatalf("another allowed host: %s", res)
		}
		if got := authAt(m, upAllowed); len(got) != 1 || got[0] != "Bearer "+ph {
			t.Fatalf("another host got %q, want the placeholder", got)
		}
		m = u.mark()
		if res := curlEcho(t, "http://api.openai.test/echo"); !strings.Contains(res.Out, "HTTP/1.1 200") {
			t.Fatalf("plain HTTP: %s", res)
		}
		if got := authAt(m, upOpenAI); len(got) != 1 || got[0] != "Bearer "+ph {
			t.Fatalf("plain HTTP to the bound host got %q, want the placeholder", got)
		}
		m = u.mark()
		res := curlEcho(t, `-H "X-Api-Key: $OPENAI_API_KEY" --data-raw "key=$OPENAI_API_KEY" "https://api.openai.test/echo?key=$OPENAI_API_KEY"`)
		if !strings.Contains(res.Out, "HTTP/1.1 200") {
			t.Fatalf("body and query: %s", res)
		}
		got := u.requestsSince(m, at(upOpenAI))
		if len(got) != 1 {
			t.Fatalf("upstream got %+v", got)
		}
		q := got[0]
		if q.Header.Get("Authorization") != "Bearer "+value || q.Header.Get("X-Api-Key") != value {
			t.Fatalf("headers were not swapped: %v", q.Header)
		}
		if q.Body != "key="+ph || q.Query != "key="+ph {
			t.Fatalf("body %q and query %q: want the placeholder in both", q.Body, q.Query)
		}
		// Nor on a request asking for a protocol upgrade, after which the
		// proxy could not see the bytes.
		m = u.mark()
		if res := curlEcho(t, "-H 'Connection: Upgrade' -H 'Upgrade: websocket' https://api.openai.test/echo"); !strings.Contains(res.Out, "HTTP/1.1 200") {
			t.Fatalf("upgrade: %s", res)
		}
		if got := authAt(m, upOpenAI); len(got) != 1 || got[0] != "Bearer "+ph {
			t.Fatalf("a request asking for an upgrade carried %q, want the placeholder", got)
		}
	})

	t.Run("never swapped: a second authority on one connection", func(t *testing.T) {
		m, lm := u.mark(), b.logMark(t)
		// The Host differs from the server name the proxy terminated.
		res := curlEcho(t, "-H 'Host: allowed.example.test' https://api.openai.test/echo")
		if !strings.Contains(res.Out, "HTTP/1.1 502") || !strings.Contains(res.Out, "Host differs from the TLS server name") {
			t.Fatalf("Host: allowed.example.test on api.openai.test: %s", res)
		}
		// A second request on a kept-alive connection, offering h2 first.
		var h httpAnswer
		b.probe(t, &h, "http", "api.openai.test", "443", "2", "",
			fmt.Sprintf(`[{"host":"api.openai.test","path":"/echo","headers":{"Authorization":"Bearer %s"}},{"host":"allowed.example.test","path":"/echo","headers":{"Authorization":"Bearer %[1]s"}}]`, ph))
		if len(h.Responses) != 2 || h.Responses[0].Status != 200 || h.Responses[0].Alpn == nil || *h.Responses[0].Alpn != "http/1.1" ||
			h.Responses[1].Status != 502 {
			t.Fatalf("two authorities on one connection: %+v", h)
		}
		settle()
		if got := u.requestsSince(m, at(upAllowed)); len(got) > 0 {
			t.Fatalf("the second authority received %+v", got)
		}
		if got := authAt(m, upOpenAI); len(got) != 1 || got[0] != "Bearer "+value {
			t.Fatalf("the bound host got %q, want only the first request", got)
		}
		b.expectEvent(t, lm, "allowed.example.test", "refused", "Host differs from the TLS server name")
	})

	t.Run("an upstream with a bad certificate never receives anything", func(t *testing.T) {
		m, lm := u.mark(), b.logMark(t)
		res := b.sh(t, `curl -sS -m 15 -D - -H "Authorization: Bearer $BADCERT_KEY" https://badcert.example.test/echo`)
		if !strings.Contains(res.Out, "HTTP/1.1 502") || !strings.Contains(res.Out, "upstream certificate not trusted") {
			t.Fatalf("bad certificate: %s", res)
		}
		settle()
		if got := u.requestsSince(m, at(upBadcert)); len(got) > 0 {
			t.Fatalf("the upstream with a bad certificate received %+v", got)
		}
		b.expectEvent(t, lm, "badcert.example.test", "refused", "upstream certificate not trusted")
	})

	t.Run("secret changes apply to the live sandbox", func(t *testing.T) {
		setSecret(t, "OPENAI_API_KEY", "api.openai.test", value2)
		m := u.mark()
		if res := curlEcho(t, "https://api.openai.test/echo"); !strings.Contains(res.Out, "HTTP/1.1 200") || !strings.Contains(res.Out, "Bearer "+ph) {
			t.Fatalf("after the change: %s", res)
		}
		if got := authAt(m, upOpenAI); len(got) != 1 || got[0] != "Bearer "+value2 {
			t.Fatalf("after set: the upstream got %q, want the new value", got)
		}

		if out, errs, code := r.cli(t, "", "secrets", "rm", "OPENAI_API_KEY"); code != 0 {
			t.Fatalf("secrets rm: exit %d %q %q", code, out, errs)
		}
		if res := b.sh(t, `echo "${OPENAI_API_KEY-unset}"`); strings.TrimSpace(res.Out) != "unset" {
			t.Fatalf("a command after rm sees OPENAI_API_KEY: %s", res)
		}
		// The old placeholder goes out as it is. With no secret for the
		// host the proxy no longer terminates TLS: the sandbox meets the
		// upstream's own certificate.
		m = u.mark()
		res := b.sh(t, `curl -sS -m 15 --cacert /workspace/test-ca.pem -H "Authorization: Bearer `+ph+`" https://api.openai.test/echo`)
		if res.Code != 0 || !strings.Contains(res.Out, "authorization=Bearer "+ph) {
			t.Fatalf("after rm: %s", res)
		}
		if got := authAt(m, upOpenAI); len(got) != 1 || got[0] != "Bearer "+ph {
			t.Fatalf("after rm: the upstream got %q, want the placeholder", got)
		}
	})

	t.Run("the value is nowhere in the sandbox: files, environments, memory", func(t *testing.T) {
		// A canary shaped like a value, planted in a file and in a
		// running process's environment, shows that the scan finds what
		// is there.
		canary := newSecretValue()
		b.put(t, "/tmp/canary", []byte("x"+canary+"y"))
		if st, data := r.call(t, "POST", "/v1/sandboxes/"+b.ID+"/exec", strings.NewReader(`{"cmd":["sleep","600"],"env":{"CANARY":"`+canary+`"},"background":true}`)); st != 201 {
			t.Fatalf("background exec: %d %s", st, data)
		}
		digests := strings.Join([]string{sha(value), sha(value2), sha(badValue), sha(canary)}, ",")
		var a scanAnswer
		res := b.sh(t, fmt.Sprintf("sudo python3 /workspace/probe.py scan %s %d %s /workspace /home /tmp /etc /run /root", secretPrefix, len(value), digests))
		if res.Code != 0 || json.Unmarshal([]byte(res.Out), &a) != nil {
			t.Fatalf("scan: %s", res)
		}
		t.Logf("scanned %d files, %d processes' environments and command lines, %d memory regions (%d MiB; %d unreadable)",
			a.FilesChecked, a.Procs, a.MemRegions, a.MemBytes>>20, a.MemErrors)
		canaryAt := map[string]bool{}
		for _, h := range a.Hits {
			if h[0] != sha(canary) {
				t.Errorf("a secret's value is in the sandbox: %s", h[1])
				continue
			}
			canaryAt[strings.SplitN(h[1], ":", 2)[0]] = true
		}
		if !canaryAt["file"] || !canaryAt["environ"] || !canaryAt["mem"] {
			t.Fatalf("the scan did not find the canary everywhere it was (found in %v): it proves nothing", canaryAt)
		}
		if a.FilesChecked < 100 || a.Procs < 3 || a.MemRegions < 10 {
			t.Fatalf("the scan saw too little to mean anything: %+v", a)
		}
	})

	t.Run("the value is in no log, database or API answer", func(t *testing.T) {
		// The egress log and the policy, through the API, join what the
		// test collected.
		b.egress(t)
		r.call(t, "GET", "/v1/secrets", nil)
		r.call(t, "GET", "/v1/sandboxes/"+b.ID, nil)
		r.cli(t, "", "sandbox", "egress", b.ID)
		r.cli(t, "", "secrets", "ls", "--json")
		for i, v := range values {
			if strings.Contains(s.Log.String(), v) {
				t.Errorf("value %d is in the server's log", i)
			}
			r.mu.Lock()
			for _, seen := range r.seen {
				if bytes.Contains(seen, []byte(v)) {
					t.Errorf("value %d is in an API answer or CLI output: %.200q", i, seen)
				}
			}
			r.mu.Unlock()
		}
		db, err := os.ReadFile(filepath.Join(s.DataDir, "withruntime.db"))
		if err != nil || len(db) == 0 {
			t.Fatalf("reading the database: %v", err)
		}
		// Every file of the data dir: the database, the keys, the sandbox
		// state (console logs, checkpoints).
		files := 0
		filepath.WalkDir(s.DataDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			files++
			for i, v := range values {
				if fileContains(t, p, v) {
					t.Errorf("value %d is in %s", i, p)
				}
			}
			return nil
		})
		if files < 3 {
			t.Fatalf("only %d files in the data dir", files)
		}
		if r.count() < 20 {
			t.Fatalf("only %d answers collected", r.count())
		}
	})
}

// fileContains reads path in chunks (a sandbox's layer file can be large)
// and reports whether it holds needle.
func fileContains(t *testing.T, path, needle string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	keep := 0
	for {
		n, err := f.Read(buf[keep:])
		if bytes.Contains(buf[:keep+n], []byte(needle)) {
			return true
		}
		if err != nil {
			return false
		}
		// Carry the tail over, so that a value across two reads is found.
		tail := min(len(needle)-1, keep+n)
		copy(buf, buf[keep+n-tail:keep+n])
		keep = tail
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}
