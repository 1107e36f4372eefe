package egress

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	placeholder = "wr-secret-OPENAI-7f3a"
	realValue   = "sk-REAL-0123456789"
)

var openAI = Secret{Name: "OPENAI", Host: "api.test", Placeholder: placeholder, Value: realValue}

// recorder is an upstream that records what it received.
type recorder struct {
	mu   sync.Mutex // guards reqs
	reqs []recorded
}

type recorded struct {
	host, auth, query, body string
}

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("the upstream received no request")
	}
	return r.reqs[len(r.reqs)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	auth := req.Header.Get("Authorization")
	r.mu.Lock()
	r.reqs = append(r.reqs, recorded{host: req.Host, auth: auth, query: req.URL.RawQuery, body: string(body)})
	r.mu.Unlock()
	switch req.URL.Path {
	case "/check":
		if auth != "Bearer "+realValue {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok")
	case "/echo-header":
		w.Header().Set("X-Echo", auth)
		w.Header().Set("X-"+strings.TrimPrefix(auth, "Bearer "), "in a name")
		io.WriteString(w, "echoed in a header")
	case "/echo-body":
		io.WriteString(w, "you sent: "+auth+" (and again "+auth+")")
	case "/echo-split":
		// The value split across writes that reach the proxy apart.
		f := w.(http.Flusher)
		half := len(auth) / 2
		io.WriteString(w, "start "+auth[:half])
		f.Flush()
		time.Sleep(50 * time.Millisecond)
		io.WriteString(w, auth[half:len(auth)-1])
		f.Flush()
		time.Sleep(50 * time.Millisecond)
		io.WriteString(w, auth[len(auth)-1:]+" end")
	case "/echo-upload":
		w.Write(body)
	case "/redirect":
		http.Redirect(w, req, "https://evil.test/", http.StatusFound)
	default:
		http.NotFound(w, req)
	}
}

type mitmEnv struct {
	*env
	rec, plainRec *recorder
	up, plainUp   string // the HTTPS and HTTP upstreams
	upCA          *CA
}

func newMITMEnv(t *testing.T) *mitmEnv {
	t.Helper()
	upCA, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Policy{Internet: true, Allow: []string{"api.test", "other.test", "plain.test"}}, func(c *Config) {
		c.ExtraRoots = upCA.CertPEM()
	})
	e.secrets.set(openAI)
	m := &mitmEnv{env: e, rec: &recorder{}, plainRec: &recorder{}, upCA: upCA}
	m.up = tlsUpstream(t, upCA, m.rec)
	m.plainUp = httpUpstream(t, m.plainRec)
	e.to(elsewhere(m.up))
	return m
}

// sandboxClient trusts the platform's CA (as sandboxes do) and the
// upstreams' (standing for the public roots).
func (m *mitmEnv) sandboxClient(t *testing.T) *http.Client {
	return m.client(pool(t, m.ca.CertPEM(), m.upCA.CertPEM()))
}

func bearer(r *http.Request) { r.Header.Set("Authorization", "Bearer "+placeholder) }

func TestMITMSwap(t *testing.T) {
	m := newMITMEnv(t)
	c := m.sandboxClient(t)
	p := port(m.up)

	t.Run("placeholder swapped in headers for the bound host", func(t *testing.T) {
		var proto string
		resp, err := c.Do(mustReq(t, "GET", "https://api.test:"+p+"/check", "", bearer))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		proto = resp.Proto
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("got %d %q, want 200 ok", resp.StatusCode, body)
		}
		if proto != "HTTP/1.1" {
			t.Errorf("got %s with the sandbox, want HTTP/1.1 only", proto)
		}
		if resp.TLS == nil || resp.TLS.PeerCertificates[0].Issuer.CommonName != "withruntime egress CA" {
			t.Error("the sandbox did not see the platform's certificate")
		}
		m.wantEvent("tls", "api.test", Allowed, "TLS terminated")
	})

	t.Run("never in the body or the query", func(t *testing.T) {
		code, body, _, err := get(c, "https://api.test:"+p+"/check?key="+placeholder, func(r *http.Request) {
			r.Method = "POST"
			r.Body = io.NopCloser(strings.NewReader("key=" + placeholder))
			r.ContentLength = int64(len("key=" + placeholder))
			bearer(r)
		})
		if err != nil || code != 200 {
			t.Fatalf("got %d %q %v", code, body, err)
		}
		got := m.rec.last(t)
		if got.query != "key="+placeholder || got.body != "key="+placeholder {
			t.Errorf("upstream got query %q body %q, want the placeholder untouched", got.query, got.body)
		}
		if got.auth != "Bearer "+realValue {
			t.Errorf("upstream got Authorization %q, want the real value", got.auth)
		}
	})

	t.Run("never for another host", func(t *testing.T) {
		code, _, _, err := get(c, "https://other.test:"+p+"/check", bearer)
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("got %d %v, want 401 from the upstream", code, err)
		}
		if got := m.rec.last(t); got.host != "other.test:"+p || got.auth != "Bearer "+placeholder {
			t.Errorf("upstream got %+v, want the placeholder for other.test", got)
		}
		m.wantEvent("tls", "other.test", Allowed, "")
	})

	t.Run("never over plain HTTP", func(t *testing.T) {
		m.to(elsewhere(m.plainUp))
		defer m.to(elsewhere(m.up))
		code, _, _, err := get(c, "http://api.test:"+port(m.plainUp)+"/check", bearer)
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("got %d %v, want 401 from the upstream", code, err)
		}
		if got := m.plainRec.last(t); got.auth != "Bearer "+placeholder {
			t.Errorf("upstream got %q, want the placeholder", got.auth)
		}
	})

	t.Run("Host differs from the server name", func(t *testing.T) {
		before := m.rec.count()
		code, body, _, err := get(c, "https://api.test:"+p+"/check", bearer, func(r *http.Request) { r.Host = "other.test" })
		if err != nil || code != http.StatusBadGateway {
			t.Errorf("got %d %q %v, want 502", code, body, err)
		}
		m.wantEvent("http", "other.test", Refused, "Host differs")
		if n := m.rec.count(); n != before {
			t.Errorf("the upstream got %d requests, want none", n-before)
		}
	})

	t.Run("keep-alive and secret changes", func(t *testing.T) {
		var reused []bool
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
		for i, value := range []string{realValue, "sk-NEW-987"} {
			m.secrets.set(Secret{Name: "OPENAI", Host: "*.test", Placeholder: placeholder, Value: value})
			req := mustReq(t, "GET", "https://api.test:"+p+"/echo-upload", "", bearer)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := m.rec.last(t).auth; got != "Bearer "+value {
				t.Errorf("request %d: upstream got %q, want %q", i, got, "Bearer "+value)
			}
		}
		if len(reused) != 2 || !reused[1] {
			t.Errorf("connections reused: %v, want the second request on the first's connection", reused)
		}
		m.secrets.set(openAI)
	})

	t.Run("policy change applies to the next request", func(t *testing.T) {
		if code, _, _, err := get(c, "https://api.test:"+p+"/check", bearer); err != nil || code != 200 {
			t.Fatalf("got %d %v, want 200", code, err)
		}
		before := m.rec.count()
		m.dir.setPolicy(Policy{Internet: true, Allow: []string{"other.test"}})
		defer m.dir.setPolicy(Policy{Internet: true, Allow: []string{"api.test", "other.test", "plain.test"}})
		code, _, _, err := get(c, "https://api.test:"+p+"/check", bearer)
		if err != nil || code != http.StatusBadGateway {
			t.Errorf("got %d %v, want 502", code, err)
		}
		m.wantEvent("http", "api.test", Refused, "name not allowed")
		if n := m.rec.count(); n != before {
			t.Errorf("the upstream got %d requests, want none", n-before)
		}
	})

	t.Run("large upload and download streamed", func(t *testing.T) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
		big = append(big, placeholder...)
		req := mustReq(t, "POST", "https://api.test:"+p+"/echo-upload", string(big), bearer)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, big) {
			t.Errorf("got %d bytes back, want the %d sent", len(got), len(big))
		}
	})

	t.Run("redirect to a denied host is not followed", func(t *testing.T) {
		code, _, h, err := get(c, "https://api.test:"+p+"/redirect")
		if err != nil || code != http.StatusFound {
			t.Fatalf("got %d %v", code, err)
		}
		if _, _, _, err := get(c, h.Get("Location")); err == nil {
			t.Error("following the redirect: got a response, want the connection refused")
		}
		m.wantEvent("tls", "evil.test", Refused, "name not allowed")
	})
}

func TestMITMEcho(t *testing.T) {
	m := newMITMEnv(t)
	c := m.sandboxClient(t)
	p := port(m.up)
	for _, path := range []string{"/echo-header", "/echo-body", "/echo-split"} {
		t.Run(path, func(t *testing.T) {
			resp, err := c.Do(mustReq(t, "GET", "https://api.test:"+p+path, "", bearer))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var all bytes.Buffer
			resp.Header.Write(&all)
			all.Write(body)
			if bytes.Contains(bytes.ToLower(all.Bytes()), bytes.ToLower([]byte(realValue))) {
				t.Errorf("the real value reached the sandbox:\n%s", all.String())
			}
			if got := m.rec.last(t).auth; got != "Bearer "+realValue {
				t.Errorf("upstream got %q, want the real value", got)
			}
			switch path {
			case "/echo-header":
				if got := resp.Header.Get("X-Echo"); got != "Bearer "+placeholder {
					t.Errorf("X-Echo %q, want the placeholder", got)
				}
			case "/echo-body":
				if want := "you sent: Bearer " + placeholder + " (and again Bearer " + placeholder + ")"; string(body) != want {
					t.Errorf("body %q, want %q", body, want)
				}
			case "/echo-split":
				if want := "start Bearer " + placeholder + " end"; string(body) != want {
					t.Errorf("body %q, want %q", body, want)
				}
			}
		})
	}
}

// TestMITMUntrustedUpstream: an upstream whose certificate is not from a
// trusted root never receives the request, let alone the secret.
func TestMITMUntrustedUpstream(t *testing.T) {
	m := newMITMEnv(t)
	badCA, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	bad := tlsUpstream(t, badCA, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	m.to(elsewhere(bad))
	code, body, _, err := get(m.sandboxClient(t), "https://api.test:"+port(bad)+"/check", bearer)
	if err != nil || code != http.StatusBadGateway {
		t.Errorf("got %d %q %v, want 502", code, body, err)
	}
	if strings.Contains(body, realValue) {
		t.Error("the 502 carries the secret")
	}
	m.wantEvent("http", "api.test", Refused, "upstream certificate not trusted")
	if n := hits.Load(); n != 0 {
		t.Errorf("the untrusted upstream got %d requests, want none", n)
	}
}

// TestMITMNoHTTP2: the sandbox is never offered HTTP/2 on a terminated
// connection, so no connection carries a second authority.
func TestMITMNoHTTP2(t *testing.T) {
	m := newMITMEnv(t)
	conn, err := tls.Dial("tcp4", m.addr, &tls.Config{ServerName: "api.test", RootCAs: pool(t, m.ca.CertPEM()), NextProtos: []string{"h2"}})
	if err == nil {
		defer conn.Close()
		if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
			t.Fatalf("negotiated %s, want no HTTP/2", p)
		}
	}
	conn, err = tls.Dial("tcp4", m.addr, &tls.Config{ServerName: "api.test", RootCAs: pool(t, m.ca.CertPEM()), NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1", p)
	}
}

func mustReq(t *testing.T, method, url, body string, mods ...func(*http.Request)) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		m(req)
	}
	return req
}
