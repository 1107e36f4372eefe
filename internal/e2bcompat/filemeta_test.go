package e2bcompat

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/withruntime/withruntime/api"
)

// TestFileMetadata: an upload's X-Metadata-* headers are the written
// files' user.e2b.* attributes (keys lowercased, first value of a repeat),
// answered on the write and reported by Stat and ListDir; a write without
// them leaves none; bad ones are refused before anything is written.
func TestFileMetadata(t *testing.T) {
	s, ff, mk := newFilesServer(t)
	do := func(target string, body []byte, hdr ...string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := mk("POST", target, body, hdr...)
		if target == "/files?path=dup.txt" {
			r.Header.Add("X-Metadata-Author", "second")
		}
		s.ServeHTTP(w, r)
		return w
	}
	written := func(w *httptest.ResponseRecorder) []map[string]any {
		t.Helper()
		var got []map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
			t.Fatalf("write: got %d %s", w.Code, w.Body)
		}
		return got
	}
	want := map[string]any{"author": "mish", "purpose": "upload"}

	got := written(do("/files?path=dup.txt", []byte("x"), "Content-Type", "application/octet-stream",
		"X-Metadata-Author", "mish", "x-metadata-PURPOSE", "upload"))
	if !reflect.DeepEqual(got[0]["metadata"], want) {
		t.Errorf("octet-stream write: got metadata %v, want %v", got[0]["metadata"], want)
	}
	if a := ff.attrs["/home/user/dup.txt"]; !reflect.DeepEqual(a, map[string]string{"e2b.author": "mish", "e2b.purpose": "upload"}) {
		t.Errorf("the API was asked for attrs %v", a)
	}

	// Multipart: every file gets the same.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, name := range []string{"m/1.txt", "m/2.txt"} {
		pw, _ := mw.CreateFormFile("file", name)
		pw.Write([]byte(name))
	}
	mw.Close()
	got = written(do("/files", buf.Bytes(), "Content-Type", mw.FormDataContentType(), "X-Metadata-Src", "suite"))
	if len(got) != 2 || !reflect.DeepEqual(got[0]["metadata"], map[string]any{"src": "suite"}) || !reflect.DeepEqual(got[1]["metadata"], got[0]["metadata"]) {
		t.Errorf("multipart write: got %v", got)
	}

	code, out := rpc(t, s, mk, "Stat", `{"path":"dup.txt"}`)
	if entry, _ := out["entry"].(map[string]any); code != 200 || !reflect.DeepEqual(entry["metadata"], want) {
		t.Errorf("Stat: got %d %v, want metadata %v", code, out, want)
	}
	code, out = rpc(t, s, mk, "ListDir", `{"path":"m"}`)
	entries, _ := out["entries"].([]any)
	if code != 200 || len(entries) != 2 || !reflect.DeepEqual(entries[1].(map[string]any)["metadata"], map[string]any{"src": "suite"}) {
		t.Errorf("ListDir: got %d %v", code, out)
	}

	// Without headers the file has none, and the answer says none.
	got = written(do("/files?path=/home/user/dup.txt", []byte("y"), "Content-Type", "application/octet-stream"))
	if _, ok := got[0]["metadata"]; ok {
		t.Errorf("write without metadata: got %v", got[0])
	}
	code, out = rpc(t, s, mk, "Stat", `{"path":"dup.txt"}`)
	if entry, _ := out["entry"].(map[string]any); code != 200 || entry["metadata"] != nil {
		t.Errorf("Stat after a plain write: got %d %v, want no metadata", code, out)
	}

	// The agent's refusal is the client's 400, before anything is written.
	puts := len(ff.puts)
	if w := do("/files?path=bad.txt", []byte("z"), "Content-Type", "application/octet-stream", "X-Metadata-K", "bad"); w.Code != http.StatusBadRequest {
		t.Errorf("refused metadata: got %d %s, want 400", w.Code, w.Body)
	}
	if len(ff.puts) != puts {
		t.Errorf("a refused write was made: %v", ff.puts[puts:])
	}
	// An agent that ignores attributes: said, not passed over.
	if w := do("/files?path=old-agent.txt", []byte("z"), "Content-Type", "application/octet-stream", "X-Metadata-K", "v"); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "no file metadata") {
		t.Errorf("metadata an old agent dropped: got %d %s, want 400 saying so", w.Code, w.Body)
	}
}

func TestEntryInfoOwnerAndMetadata(t *testing.T) {
	fi := api.FileInfo{Name: "a", Path: "/etc/a", Type: "file", Mode: 0o644, ModTime: time.Unix(1, 0),
		Owner: "root", Group: "adm", Attrs: map[string]string{"e2b.k": "v", "other": "x", "e2b.": "empty key"}}
	b, err := protojson.Marshal(entryInfo(fi, "user"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(b, &got)
	if got["owner"] != "root" || got["group"] != "adm" || !reflect.DeepEqual(got["metadata"], map[string]any{"k": "v"}) {
		t.Errorf("got %s, want owner root, group adm, metadata {k: v}", b)
	}
}
