package e2bcompat

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// TestExecuteBodyBound: a cell the API would refuse for its size is
// refused here, before anything is forwarded.
func TestExecuteBodyBound(t *testing.T) {
	f := &codeAPI{cell: func(api.CodeRequest) (int, []api.CodeEvent) {
		return http.StatusOK, []api.CodeEvent{{Type: api.CodeEventEnd, ExecutionCount: 1}}
	}}
	s, err := New(Config{API: f.handler(), Secret: make([]byte, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	w := execute(t, s, `{"code":"`+strings.Repeat("x", 1<<20)+`"}`)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("got %d for a 1 MiB cell, want 413", w.Code)
	}
	if len(f.cells) != 0 {
		t.Errorf("got %d cells forwarded, want none", len(f.cells))
	}
}

// countingBody counts what is read of it.
type countingBody struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestControlKeyBeforeBody: the body of a caller the API does not know is
// not read.
func TestControlKeyBeforeBody(t *testing.T) {
	s, _ := newControl(t, "")
	for _, path := range []string{"/sandboxes", "/sandboxes/sbx0/timeout", "/sandboxes/sbx0/connect"} {
		var n atomic.Int64
		body := `{"templateID":"base","metadata":{"a":"` + strings.Repeat("x", 1<<19) + `"}}`
		r := httptest.NewRequest(http.MethodPost, path, countingBody{strings.NewReader(body), &n})
		r.ContentLength = int64(len(body))
		r.Header.Set("X-API-KEY", "e2b_wr_bad")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized || n.Load() != 0 {
			t.Errorf("%s with a bad key: got %d after reading %d bytes, want 401 after none", path, w.Code, n.Load())
		}
	}
	if code, _, _ := call(s, "e2b_wr_good", http.MethodPost, "/sandboxes", `{"templateID":"base","timeout":60}`); code != http.StatusCreated {
		t.Errorf("create with a good key: got %d, want 201", code)
	}
}

// TestRunToolBounded: the layer's own commands run with a timeout, their
// stdout kept nowhere and only the end of their stderr in the message.
func TestRunToolBounded(t *testing.T) {
	pa := newProcAPI(t)
	s, err := New(Config{API: pa.handler(), Secret: make([]byte, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	sbx := &Sandbox{ID: "run", C: s.client("wr_good"), User: UserDefault}
	script := `head -c 4000000 /dev/zero; head -c 4000000 /dev/zero | tr '\0' e >&2; echo LAST >&2; exit 3`
	res, stderr, err := runTool(t.Context(), sbx, api.ExecRequest{Cmd: api.Command{Argv: []string{"bash", "-c", script}}}, killTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Stdout != "" || len(stderr) > tailCap || !strings.HasSuffix(stderr, "eeeLAST") {
		t.Errorf("got exit %d, %d bytes of stdout kept, stderr of %d bytes ending %q; want 3, none, at most %d ending eeeLAST",
			res.ExitCode, len(res.Stdout), len(stderr), stderr[max(0, len(stderr)-10):], tailCap)
	}
	if got := pa.lastExec().TimeoutMs; got != killTimeout.Milliseconds() {
		t.Errorf("got timeout_ms %d, want %d", got, killTimeout.Milliseconds())
	}
}

// TestConnectNoGzip: a gzip'd request is refused, not inflated; the same
// request plain is served.
func TestConnectNoGzip(t *testing.T) {
	s, ff, mk := newFilesServer(t)
	ff.files["/home/user/a.txt"] = []byte("hello")
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(`{"path":"a.txt"}`))
	zw.Close()
	code, out := rpc(t, s, mk, "Stat", z.String(), "Content-Encoding", "gzip")
	if code == http.StatusOK || out["code"] != "unimplemented" {
		t.Errorf("gzip'd Stat: got %d %v, want unimplemented", code, out)
	}
	if code, out := rpc(t, s, mk, "Stat", `{"path":"a.txt"}`); code != http.StatusOK {
		t.Errorf("plain Stat: got %d %v, want 200", code, out)
	}
}

// TestUploadPartsBounded: parts that are not files count toward the bound
// on parts and are bounded in size.
func TestUploadPartsBounded(t *testing.T) {
	s, _, mk := newFilesServer(t)
	upload := func(fields int, field string) int {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for range fields {
			mw.WriteField("other", field)
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="a.txt"`)
		pw, _ := mw.CreatePart(h)
		pw.Write([]byte("a"))
		mw.Close()
		w := httptest.NewRecorder()
		s.ServeHTTP(w, mk("POST", "/files", buf.Bytes(), "Content-Type", mw.FormDataContentType()))
		return w.Code
	}
	for _, c := range []struct {
		fields int
		field  string
		want   int
	}{
		{1, "x", http.StatusOK},
		{maxFilesPerUpload, "x", http.StatusBadRequest},
		{1, strings.Repeat("x", maxOtherPart+1), http.StatusBadRequest},
	} {
		if got := upload(c.fields, c.field); got != c.want {
			t.Errorf("%d other parts of %d bytes and a file: got %d, want %d", c.fields, len(c.field), got, c.want)
		}
	}
}

// TestControlListFilters: order (asc or desc), startedAfter and the
// templates every sandbox is are honoured; another order is refused;
// another template lists nothing.
func TestControlListFilters(t *testing.T) {
	s, _ := newControl(t, "")
	call(s, "wr_good", "POST", "/v2/sandboxes", `{"templateID":"base"}`)
	for _, c := range []struct {
		query  string
		status int
		n      int
	}{
		{"order=desc", 200, 1},
		{"template=base", 200, 1},
		{"template=code-interpreter-v1&order=DESC", 200, 1},
		{"template=desktop", 200, 0},
		{"order=asc", 200, 1},
		{"startedAfter=2020-01-01T00:00:00Z", 200, 1},
		{"startedAfter=2999-01-01T00:00:00Z", 200, 0},
		{"order=sideways", 400, 0},
	} {
		status, _, body := call(s, "wr_good", "GET", "/v2/sandboxes?"+c.query, ``)
		var l []map[string]any
		json.Unmarshal(body, &l)
		if status != c.status || len(l) != c.n {
			t.Errorf("%s: got %d with %d sandboxes, want %d with %d", c.query, status, len(l), c.status, c.n)
		}
	}
}
