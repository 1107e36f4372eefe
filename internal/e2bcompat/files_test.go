package e2bcompat

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"mime/multipart"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"
)

func TestFilesReadWrite(t *testing.T) {
	s, ff, mk := newFilesServer(t)
	do := func(method, target string, body []byte, hdr ...string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, mk(method, target, body, hdr...))
		return w
	}

	// Multipart, several files: each part's filename is its whole path,
	// relative ones under the user's home.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range []struct{ name, body string }{{"dir/one.txt", "1"}, {"/tmp/deep/two.bin", "\x00\xff"}} {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+f.name+`"`)
		h.Set("Content-Type", "application/octet-stream")
		pw, _ := mw.CreatePart(h)
		pw.Write([]byte(f.body))
	}
	mw.WriteField("other", "ignored")
	mw.Close()
	w := do("POST", "/files", buf.Bytes(), "Content-Type", mw.FormDataContentType())
	var got []map[string]string
	json.Unmarshal(w.Body.Bytes(), &got)
	if w.Code != 200 || len(got) != 2 || got[0]["path"] != "/home/user/dir/one.txt" || got[0]["name"] != "one.txt" ||
		got[0]["type"] != "file" || got[1]["path"] != "/tmp/deep/two.bin" {
		t.Errorf("multipart write: got %d %s", w.Code, w.Body)
	}
	if string(ff.files["/tmp/deep/two.bin"]) != "\x00\xff" || string(ff.files["/home/user/dir/one.txt"]) != "1" {
		t.Errorf("multipart write: files hold %q and %q", ff.files["/home/user/dir/one.txt"], ff.files["/tmp/deep/two.bin"])
	}

	// A single file: ?path= names it.
	buf.Reset()
	mw = multipart.NewWriter(&buf)
	pw, _ := mw.CreateFormFile("file", "ignored-name")
	pw.Write([]byte("single"))
	mw.Close()
	w = do("POST", "/files?path=s.txt", buf.Bytes(), "Content-Type", mw.FormDataContentType())
	if w.Code != 200 || string(ff.files["/home/user/s.txt"]) != "single" {
		t.Errorf("single multipart write: got %d %s", w.Code, w.Body)
	}

	// Octet-stream, gzip-encoded.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("streamed"))
	zw.Close()
	w = do("POST", "/files?path=z.txt", gz.Bytes(), "Content-Type", "application/octet-stream", "Content-Encoding", "gzip")
	if w.Code != 200 || string(ff.files["/home/user/z.txt"]) != "streamed" || !strings.HasPrefix(w.Body.String(), "[") {
		t.Errorf("gzip octet-stream write: got %d %s, file %q", w.Code, w.Body, ff.files["/home/user/z.txt"])
	}

	// Read: raw bytes, small files with their length, large ones streamed.
	w = do("GET", "/files?path=/tmp/deep/two.bin", nil)
	if w.Code != 200 || w.Body.String() != "\x00\xff" || w.Header().Get("Content-Length") != "2" {
		t.Errorf("read: got %d %q, Content-Length %q", w.Code, w.Body, w.Header().Get("Content-Length"))
	}
	ff.files["/home/user/empty"] = []byte{}
	w = do("GET", "/files?path=empty", nil)
	if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "0" {
		t.Errorf("read empty: got %d %q, Content-Length %q, want 0", w.Code, w.Body, w.Header().Get("Content-Length"))
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	ff.files["/home/user/big"] = big
	w = do("GET", "/files?path=big", nil)
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), big) {
		t.Errorf("read big: got %d, %d bytes, want %d", w.Code, w.Body.Len(), len(big))
	}

	// Errors: E2B's JSON with the status as code.
	for _, c := range []struct {
		name, method, target string
		body                 []byte
		hdr                  []string
		status               int
	}{
		{"missing file", "GET", "/files?path=nope", nil, nil, 404},
		{"no path", "GET", "/files", nil, nil, 400},
		{"full disk", "POST", "/files?path=/full/x", []byte("x"), []string{"Content-Type", "application/octet-stream"}, 507},
		{"octet-stream without path", "POST", "/files", []byte("x"), []string{"Content-Type", "application/octet-stream"}, 400},
		{"empty multipart", "POST", "/files", []byte("--b--\r\n"), []string{"Content-Type", "multipart/form-data; boundary=b"}, 400},
		{"bad token", "GET", "/files?path=s.txt", nil, []string{headerAccessToken, "wre2b_forged"}, 401},
		{"bad signature", "GET", "/files?path=s.txt&signature=v1_x", nil, nil, 401},
	} {
		w := do(c.method, c.target, c.body, c.hdr...)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != c.status || e.Code != c.status || e.Message == "" {
			t.Errorf("%s: got %d %s, want %d with {code, message}", c.name, w.Code, w.Body, c.status)
		}
	}

	// ?username=root writes as root, relative to /root.
	w = do("POST", "/files?path=r.txt&username=root", []byte("R"), "Content-Type", "application/octet-stream")
	if w.Code != 200 || string(ff.files["/root/r.txt"]) != "R" || ff.users["/root/r.txt"] != "root" {
		t.Errorf("write as root: got %d %s, user=%q", w.Code, w.Body, ff.users["/root/r.txt"])
	}

	// A good signature passes.
	tok := mk("GET", "/", nil).Header.Get(headerAccessToken)
	sig := fileSignature("s.txt", "read", "", tok, 0)
	w = do("GET", "/files?path=s.txt&signature="+strings.ReplaceAll(sig, "+", "%2B"), nil)
	if w.Code != 200 || w.Body.String() != "single" {
		t.Errorf("signed read: got %d %s", w.Code, w.Body)
	}

	// Health: 204 for a running sandbox, 502 "was not found" for another.
	if w = do("GET", "/health", nil); w.Code != 204 {
		t.Errorf("health: got %d, want 204", w.Code)
	}
	r := mk("GET", "/health", nil)
	r.Header.Set(headerSandboxID, "gone")
	r.Header.Set(headerAccessToken, s.sealToken("gone", "wr_good"))
	w = httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 502 || !strings.Contains(w.Body.String(), "was not found") {
		t.Errorf("health of a gone sandbox: got %d %s, want 502 was not found", w.Code, w.Body)
	}
}
