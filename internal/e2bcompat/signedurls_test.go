package e2bcompat

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// TestSignedURLWithoutToken: a pre-signed /files URL works with no header
// at all (as a browser fetches it), routed by its signature to the
// sandbox whose token made it; a URL signed with a token the server never
// saw, for another path, another operation, or expired, is refused 401
// with E2B's messages; a header-less request without a signature still
// reaches no sandbox.
func TestSignedURLWithoutToken(t *testing.T) {
	s, ff, mk := newFilesServer(t)
	tok := mk("GET", "/", nil).Header.Get(headerAccessToken)
	ff.files["/home/user/s.txt"] = []byte("secret contents")
	bare := func(method, path, op, token string, exp int64, body []byte) *httptest.ResponseRecorder {
		q := url.Values{"path": {path}, "signature": {fileSignature(path, op, "", token, exp)}}
		if exp != 0 {
			q.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		r := httptest.NewRequest(method, "http://e2b.test/files?"+q.Encode(), bytes.NewReader(body))
		if body != nil {
			r.Header.Set("Content-Type", "application/octet-stream")
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	if w := bare("GET", "s.txt", "read", tok, 0, nil); w.Code != 200 || w.Body.String() != "secret contents" {
		t.Fatalf("signed read without a token: %d %s", w.Code, w.Body)
	}
	if w := bare("GET", "s.txt", "read", tok, time.Now().Add(time.Minute).Unix(), nil); w.Code != 200 {
		t.Fatalf("signed read with an expiry ahead: %d %s", w.Code, w.Body)
	}
	if w := bare("POST", "up.txt", "write", tok, 0, []byte("uploaded")); w.Code != 200 || string(ff.files["/home/user/up.txt"]) != "uploaded" {
		t.Fatalf("signed write without a token: %d %s", w.Code, w.Body)
	}
	other, err := New(Config{API: http.NotFoundHandler(), Secret: bytes.Repeat([]byte{3}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	foreign := other.sealToken("run", "wr_good")
	for _, c := range []struct {
		name, method, path, op, token string
		exp                           int64
		msg                           string
	}{
		{"a token never seen", "GET", "s.txt", "read", foreign, 0, ""},
		{"a guessed token", "GET", "s.txt", "read", "wre2b_guess", 0, ""},
		{"signed for a write, used to read", "GET", "s.txt", "write", tok, 0, ""},
		{"expired", "GET", "s.txt", "read", tok, time.Now().Add(-2 * time.Minute).Unix(), "signature is already expired"},
	} {
		w := bare(c.method, c.path, c.op, c.token, c.exp, nil)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != 401 || e.Code != 401 || (c.msg != "" && e.Message != c.msg) || bytes.Contains(w.Body.Bytes(), []byte("secret contents")) {
			t.Errorf("%s: %d %s, want 401 %q", c.name, w.Code, w.Body, c.msg)
		}
	}
	// A signature for one path does not open another.
	q := url.Values{"path": {"up.txt"}, "signature": {fileSignature("s.txt", "read", "", tok, 0)}}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "http://e2b.test/files?"+q.Encode(), nil))
	if w.Code != 401 {
		t.Errorf("a signature for another path: %d %s", w.Code, w.Body)
	}
	// No signature, no header: the control plane, which has no /files.
	w = httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "http://e2b.test/files?path=s.txt", nil))
	if w.Code == 200 {
		t.Errorf("an unsigned header-less read was served: %s", w.Body)
	}
}

// TestKnownTokensBound: the tokens remembered stay within their bound,
// the oldest forgotten first.
func TestKnownTokensBound(t *testing.T) {
	var k knownTokens
	for i := range maxKnownTokens + 10 {
		k.add("sb", strconv.Itoa(i))
	}
	if len(k.sandbox) != maxKnownTokens || len(k.order) != maxKnownTokens {
		t.Fatalf("%d tokens kept (%d ordered), want %d", len(k.sandbox), len(k.order), maxKnownTokens)
	}
	if _, _, ok := k.find("sb", func(t string) bool { return t == "0" }); ok {
		t.Error("the oldest token was kept")
	}
	if sb, _, ok := k.find("", func(t string) bool { return t == strconv.Itoa(maxKnownTokens+9) }); !ok || sb != "sb" {
		t.Error("the newest token was lost")
	}
	if _, _, ok := k.find("other", func(string) bool { return true }); ok {
		t.Error("a token was found for a sandbox it is not of")
	}
}
