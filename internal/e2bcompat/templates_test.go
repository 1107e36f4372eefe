package e2bcompat

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// buildAPI stands in for withruntime's template API (the real one needs
// gVisor; the live test sdk/python/tests/test_e2b_template.py drives it
// with E2B's own client): keys wr_a and wr_b of two accounts, names "Bad
// Name" refused as the API refuses them, and each build's specification
// and context kept as received.
type buildAPI struct {
	mu      sync.Mutex
	builds  map[string]*received
	n       int
	revoked map[string]bool
}

type received struct {
	key   string
	spec  map[string]any
	files map[string]string // context entries: name -> content ("<dir>" / "-> target")
	state string
}

func (f *buildAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	answer, fail := answering(w)
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if key != "wr_a" && key != "wr_b" || f.revoked[key] {
		fail(401, "unauthorized")
		return
	}
	p := r.URL.EscapedPath()
	switch {
	case r.Method == "GET" && p == "/v1/sandboxes":
		answer(200, api.SandboxList{})
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/templates/builds/") && strings.HasSuffix(p, "/logs"):
		w.Header().Set("Content-Type", "application/x-ndjson")
		now := time.Now()
		for _, ev := range []api.BuildLogEvent{
			{Time: now, Type: api.BuildLogStep, Step: 1, Steps: 2, Message: "run make", Cached: true},
			{Time: now, Type: api.BuildLogStep, Step: 2, Steps: 2, Message: "run false"},
			{Time: now, Type: api.BuildLogStderr, Step: 2, Message: "it broke"},
			{Time: now, Type: api.BuildLogEnd, State: "failed", Message: "step 2 failed"},
		} {
			json.NewEncoder(w).Encode(ev)
		}
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/templates/builds/"):
		b := f.builds[strings.TrimPrefix(p, "/v1/templates/builds/")]
		if b == nil || b.key != key {
			fail(404, "not_found")
			return
		}
		answer(200, api.TemplateBuild{ID: "x", State: b.state, Step: 2, Error: &api.ErrorDetail{Code: "invalid_request", Message: "step 2 (run false): exit 1"}})
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/templates/"):
		name, _ := url.PathUnescape(strings.TrimPrefix(p, "/v1/templates/"))
		switch {
		case strings.ContainsAny(name, " !"):
			fail(400, "invalid_request")
		case name == "have" || name == "have:latest":
			answer(200, api.Template{Name: "have", Tag: "latest", Public: true})
		default:
			fail(404, "not_found")
		}
	case r.Method == "POST" && p == "/v1/templates":
		rec := &received{key: key, files: map[string]string{}, state: "failed"}
		if r.Header.Get("Content-Type") == "application/json" {
			json.NewDecoder(r.Body).Decode(&rec.spec)
		} else {
			tr := tar.NewReader(r.Body)
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				data, _ := io.ReadAll(tr)
				switch {
				case h.Name == api.BuildSpecEntry:
					json.Unmarshal(data, &rec.spec)
				case h.Typeflag == tar.TypeDir:
					rec.files[h.Name] = "<dir>"
				case h.Typeflag == tar.TypeLink:
					rec.files[h.Name] = "=> " + h.Linkname
				default:
					rec.files[h.Name] = string(data)
				}
			}
		}
		f.n++
		id := fmt.Sprintf("bld_%016d", f.n)
		f.builds[id] = rec
		answer(202, api.TemplateBuild{ID: id, State: "queued"})
	default:
		fail(404, "not_found")
	}
}

func (f *buildAPI) last() *received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.builds[fmt.Sprintf("bld_%016d", f.n)]
}

type e2bCaller struct {
	t    *testing.T
	base string
}

// call makes an E2B API call with key; the answer's status and JSON body.
func (c e2bCaller) call(method, path, key string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (c e2bCaller) put(u string, body []byte) int {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// archive is a tar of files (name -> content; "<dir>" a directory; "=>
// X" a hard link to X), gzipped when zip.
func archive(t *testing.T, zip bool, files [][2]string) []byte {
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if zip {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{Name: f[0], Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(f[1]))}
		switch {
		case f[1] == "<dir>":
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		case strings.HasPrefix(f[1], "=> "):
			h.Typeflag, h.Size, h.Linkname = tar.TypeLink, 0, strings.TrimPrefix(f[1], "=> ")
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(f[1]))
		}
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

func newBuildServer(t *testing.T) (*buildAPI, e2bCaller, *Server) {
	fake := &buildAPI{builds: map[string]*received{}, revoked: map[string]bool{}}
	s, err := New(Config{API: fake, Secret: bytes.Repeat([]byte{9}, SecretSize), UploadDir: t.TempDir() + "/uploads",
		Accounts: func(_ context.Context, key string) (string, error) { return "acct-" + key, nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return fake, e2bCaller{t: t, base: srv.URL}, s
}

var (
	hashApp = strings.Repeat("a", 64)
	hashCfg = strings.Repeat("c", 64)
)

func TestTemplateBuildFlow(t *testing.T) {
	fake, c, s := newBuildServer(t)
	st, rb := c.call("POST", "/v3/templates", "wr_a", map[string]any{"name": "team/app:v2", "cpuCount": 2, "memoryMB": 1024})
	if st != 202 || rb["templateID"] != "team/app" || rb["buildID"] == "" || fmt.Sprint(rb["tags"]) != "[v2]" {
		t.Fatalf("request build: %d %v", st, rb)
	}
	tid, bid := url.PathEscape("team/app"), rb["buildID"].(string)

	// Before the upload the files are not present; the link is a URL on
	// this server with a token, which works for that hash only.
	st, link := c.call("GET", "/templates/"+tid+"/files/"+hashApp, "wr_a", nil)
	if st != 201 || link["present"] != false {
		t.Fatalf("files link: %d %v", st, link)
	}
	upload := link["url"].(string)
	if !strings.HasPrefix(upload, c.base+"/templates/team%2Fapp/files/"+hashApp+"?token=") {
		t.Fatalf("upload URL %q", upload)
	}
	if got := c.put(strings.Replace(upload, hashApp, hashCfg, 1), archive(t, false, [][2]string{{"x", "y"}})); got != 401 {
		t.Errorf("a token used for another hash: %d, want 401", got)
	}
	if got := c.put(strings.Split(upload, "?")[0], nil); got != 401 {
		t.Errorf("an upload without a token: %d, want 401", got)
	}
	app := archive(t, true, [][2]string{{"app", "<dir>"}, {"app/main.py", "print(1)"}, {"app/copy.py", "=> app/main.py"}})
	if got := c.put(upload, app); got != 200 {
		t.Fatalf("upload: %d", got)
	}
	if _, link := c.call("GET", "/templates/"+tid+"/files/"+hashApp, "wr_a", nil); link["present"] != true {
		t.Errorf("after the upload, present = %v", link["present"])
	}
	// Another account does not see them.
	if _, link := c.call("GET", "/templates/"+tid+"/files/"+hashApp, "wr_b", nil); link["present"] != false {
		t.Errorf("another account sees the upload: %v", link)
	}
	_, link = c.call("GET", "/templates/"+tid+"/files/"+hashCfg, "wr_a", nil)
	if got := c.put(link["url"].(string), archive(t, false, [][2]string{{"conf/a.cfg", "A"}, {"conf/b.cfg", "B"}})); got != 200 {
		t.Fatalf("upload: %d", got)
	}

	start := map[string]any{
		"fromImage": "e2bdev/base", "force": false,
		"startCmd": "python3 -m http.server", "readyCmd": "true",
		"steps": []map[string]any{
			{"type": "COPY", "args": []string{"app", "/home/user/app", "", ""}, "filesHash": hashApp, "force": false},
			{"type": "COPY", "args": []string{"conf/*.cfg", "/etc/x/", "root", "0640"}, "filesHash": hashCfg, "force": false},
			{"type": "RUN", "args": []string{"make", "root"}, "force": true},
			{"type": "ENV", "args": []string{"A", "1", "B", "2"}, "force": false},
			{"type": "WORKDIR", "args": []string{"/home/user/app"}, "force": false},
			{"type": "USER", "args": []string{"user"}, "force": false},
		},
	}
	// Another account cannot start (or see) this build.
	if st, _ := c.call("POST", "/v2/templates/"+tid+"/builds/"+bid, "wr_b", start); st != 404 {
		t.Errorf("another account's start: %d, want 404", st)
	}
	if st, _ := c.call("GET", "/templates/"+tid+"/builds/"+bid+"/status", "wr_b", nil); st != 404 {
		t.Errorf("another account's status: %d, want 404", st)
	}
	if st, body := c.call("GET", "/templates/"+tid+"/builds/"+bid+"/status", "wr_a", nil); st != 200 || body["status"] != "waiting" {
		t.Errorf("status before the start: %d %v", st, body)
	}
	if st, body := c.call("POST", "/v2/templates/"+tid+"/builds/"+bid, "wr_a", start); st != 202 {
		t.Fatalf("start: %d %v", st, body)
	}
	got := fake.last()
	if got.key != "wr_a" {
		t.Errorf("the build was made with key %q", got.key)
	}
	spec, _ := json.Marshal(got.spec)
	want := `{"from":{"template":"default"},"memory_mib":1024,"name":"team/app:v2","network":{"internet":true},"ready_cmd":"true","start_cmd":"python3 -m http.server",` +
		`"steps":[{"copy":{"dest":"/home/user/app","src":"e2b/1/app"}},{"copy":{"dest":"/etc/x/","mode":"0640","src":"e2b/2","user":"root"}},` +
		`{"no_cache":true,"run":"make","user":"root"},{"env":{"A":"1","B":"2"}},{"workdir":"/home/user/app"},{"user":"user"}],"vcpus":2}`
	if string(spec) != want {
		t.Errorf("spec\n got %s\nwant %s", spec, want)
	}
	wantFiles := map[string]string{"e2b/1/app": "<dir>", "e2b/1/app/main.py": "print(1)", "e2b/1/app/copy.py": "=> e2b/1/app/main.py",
		"e2b/2/a.cfg": "A", "e2b/2/b.cfg": "B"}
	if fmt.Sprint(got.files) != fmt.Sprint(wantFiles) {
		t.Errorf("context\n got %v\nwant %v", got.files, wantFiles)
	}
	// The build took the uploads; a second start is refused.
	if h := s.uploads.hashesOf("acct-wr_a"); len(h) != 0 {
		t.Errorf("uploads left after the start: %v", h)
	}
	if st, _ := c.call("POST", "/v2/templates/"+tid+"/builds/"+bid, "wr_a", start); st != 409 {
		t.Errorf("a second start: %d, want 409", st)
	}

	// Status: E2B's state, the reason naming the step, the log a page at
	// a time from the offset.
	st, body := c.call("GET", "/templates/"+tid+"/builds/"+bid+"/status?logsOffset=1", "wr_a", nil)
	if st != 200 || body["status"] != "error" {
		t.Fatalf("status: %d %v", st, body)
	}
	reason := body["reason"].(map[string]any)
	if reason["step"] != "2" || !strings.Contains(reason["message"].(string), "exit 1") {
		t.Errorf("reason %v", reason)
	}
	var msgs []string
	for _, e := range body["logEntries"].([]any) {
		m := e.(map[string]any)
		msgs = append(msgs, m["level"].(string)+" "+m["message"].(string))
	}
	if fmt.Sprint(msgs) != "[info [builder 2/2] run false info it broke error step 2 failed]" {
		t.Errorf("log from offset 1: %q", msgs)
	}
	_, body = c.call("GET", "/templates/"+tid+"/builds/"+bid+"/status?logsOffset=0&level=error", "wr_a", nil)
	if n := len(body["logEntries"].([]any)); n != 1 {
		t.Errorf("level=error gave %d entries, want 1", n)
	}
	if _, body = c.call("GET", "/templates/"+tid+"/builds/"+bid+"/status?logsOffset=-1", "wr_a", nil); body["code"] != float64(400) {
		t.Errorf("a negative offset: %v", body)
	}

	// An upload URL is worth nothing once its key is removed.
	_, link = c.call("GET", "/templates/"+tid+"/files/"+hashApp, "wr_a", nil)
	fake.mu.Lock()
	fake.revoked["wr_a"] = true
	fake.mu.Unlock()
	if got := c.put(link["url"].(string), app); got != 401 {
		t.Errorf("an upload with a removed key's token: %d, want 401", got)
	}
	if h := s.uploads.hashesOf("acct-wr_a"); len(h) != 0 {
		t.Errorf("a refused upload is held: %v", h)
	}
}

func TestTemplateBuildRefusals(t *testing.T) {
	_, c, _ := newBuildServer(t)
	for _, tc := range []struct {
		body map[string]any
		want int
	}{
		{map[string]any{}, 400},
		{map[string]any{"name": "app", "tags": []string{"v1", "v2"}}, 400},
		{map[string]any{"name": "app:v1", "tags": []string{"v2"}}, 400},
		{map[string]any{"name": "Bad Name!"}, 400},
		{map[string]any{"name": "base"}, 400},
		{map[string]any{"name": "app", "cpuCount": -1}, 400},
	} {
		if st, body := c.call("POST", "/v3/templates", "wr_a", tc.body); st != tc.want {
			t.Errorf("%v: %d %v, want %d", tc.body, st, body, tc.want)
		}
	}
	if st, _ := c.call("POST", "/v3/templates", "", map[string]any{"name": "app"}); st != 401 {
		t.Errorf("no key: %d", st)
	}

	newBuild := func() (string, string) {
		_, rb := c.call("POST", "/v3/templates", "wr_a", map[string]any{"name": "app"})
		return rb["templateID"].(string), rb["buildID"].(string)
	}
	upload := func(hash string, data []byte) {
		_, link := c.call("GET", "/templates/app/files/"+hash, "wr_a", nil)
		if st := c.put(link["url"].(string), data); st != 200 {
			t.Fatalf("upload %d", st)
		}
	}
	copyStep := func(src, hash string) map[string]any {
		return map[string]any{"steps": []map[string]any{{"type": "COPY", "args": []string{src, "/x"}, "filesHash": hash}}}
	}
	n := 0
	for name, tc := range map[string]struct {
		start  map[string]any
		upload []byte
		want   string
	}{
		"unknown instruction":  {map[string]any{"steps": []map[string]any{{"type": "EXPOSE", "args": []string{"80"}}}}, nil, "EXPOSE"},
		"registry credentials": {map[string]any{"fromImage": "x/y", "fromImageRegistry": map[string]any{"type": "registry", "username": "u", "password": "p"}}, nil, "fromImageRegistry"},
		"odd env":              {map[string]any{"steps": []map[string]any{{"type": "ENV", "args": []string{"A"}}}}, nil, "pairs"},
		"copy without hash":    {map[string]any{"steps": []map[string]any{{"type": "COPY", "args": []string{"a", "/x"}}}}, nil, "filesHash"},
		"copy from outside":    {copyStep("../etc", hashApp), nil, "not a path inside"},
		"files never uploaded": {copyStep("a", hashApp), nil, "were not uploaded"},
		"entry climbing out":   {copyStep("a", hashApp), archive(t, false, [][2]string{{"a/../../etc/passwd", "x"}}), "not inside"},
		"absolute entry":       {copyStep("a", hashApp), archive(t, false, [][2]string{{"/etc/passwd", "x"}}), "not inside"},
		"entry beside the src": {copyStep("a", hashApp), archive(t, false, [][2]string{{"b/secret", "x"}}), "not inside"},
		"link out of the src":  {copyStep("d/*.txt", hashApp), archive(t, false, [][2]string{{"d/x.txt", "=> other/y"}}), "leads outside"},
		"not a tar":            {copyStep("a", hashApp), []byte("this is not an archive, not at all, and long enough to be read as one......" + strings.Repeat("!", 600)), "not a tar"},
	} {
		// Each case its own hash: a refused start keeps its uploads.
		n++
		hash := fmt.Sprintf("%064x", n)
		start, _ := json.Marshal(tc.start)
		tc.start = nil
		json.Unmarshal([]byte(strings.ReplaceAll(string(start), hashApp, hash)), &tc.start)
		t.Run(name, func(t *testing.T) {
			tid, bid := newBuild()
			if tc.upload != nil {
				upload(hash, tc.upload)
			}
			st, body := c.call("POST", "/v2/templates/"+tid+"/builds/"+bid, "wr_a", tc.start)
			if st != 400 || !strings.Contains(fmt.Sprint(body["message"]), tc.want) {
				t.Errorf("start: %d %v, want 400 saying %q", st, body, tc.want)
			}
		})
	}
}

func TestTemplateUploadBounds(t *testing.T) {
	up, err := newUploads(t.TempDir() + "/u")
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	// Fill the account to its bound less a little, then one more upload
	// that would pass it is refused and leaves nothing.
	up.held["acct"] = map[string]*upload{hashCfg: {size: maxAccountUploads - 1000, at: time.Now()}}
	if err := up.put("acct", hashApp, bytes.NewReader(big)); err == nil || httpStatus(err) != 413 {
		t.Fatalf("over the bound: %v", err)
	}
	if up.present("acct", hashApp) || slices.Contains(up.hashesOf("acct"), hashApp) {
		t.Error("a refused upload is held")
	}
	// Another account has its own room.
	if err := up.put("other", hashApp, bytes.NewReader(big)); err != nil || !up.present("other", hashApp) {
		t.Fatalf("another account: %v", err)
	}
	// Uploads nobody built expire.
	up.held["other"][hashApp].at = time.Now().Add(-2 * uploadTTL)
	if up.present("other", hashApp) {
		t.Error("an expired upload is present")
	}
}

func TestAliasExists(t *testing.T) {
	_, c, _ := newBuildServer(t)
	if st, body := c.call("GET", "/templates/aliases/have", "wr_a", nil); st != 200 || body["templateID"] != "have" || body["public"] != true {
		t.Errorf("an existing template: %d %v", st, body)
	}
	if st, _ := c.call("GET", "/templates/aliases/nothing", "wr_a", nil); st != 404 {
		t.Errorf("an unknown template: %d", st)
	}
}

// hashesOf lists account's uploads, for tests.
func (u *uploads) hashesOf(account string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var hs []string
	for h := range u.held[account] {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	return hs
}
