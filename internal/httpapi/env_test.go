package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/secrets"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// testEnv is a server over a real listener, with a real bbolt store, the
// fake manager and a fake agent behind it.
type testEnv struct {
	t     *testing.T
	url   string
	fake  *fakeSandboxes
	agent *fakeAgent
	store *store.Bolt
	vault *secrets.Vault
	logs  *syncBuffer
	// handler is the server's (NewServer's), under the spec's check.
	handler http.Handler
	// keys holds a secret of each kind: admin of account "admin", full and
	// read_only of account "acct1". Account "acct1" also has a full key
	// with id spareKeyID, there to be removed.
	keys map[store.KeyKind]string
}

// spareKeyID is a full key of acct1 that no test uses to authenticate.
const spareKeyID = "key-spare"

// testSecretName is a secret of acct1 that every env starts with;
// testSecretValue is its value.
const (
	testSecretName  = "TEST_SECRET"
	testSecretValue = "sk-seeded-3b7f0c9d2e41a8f6"
)

func newEnv(t *testing.T, mod func(*Config)) *testEnv {
	t.Helper()
	agent := newFakeAgent(t)
	st := storetest.OpenBolt(t)
	vault, err := secrets.Open(filepath.Join(t.TempDir(), "secrets.key"), st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vault.Set(t.Context(), "acct1", testSecretName, "api.example.org", testSecretValue); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{
		t:     t,
		fake:  newFakeSandboxes(agent.srv.Listener.Addr().String()),
		agent: agent,
		store: st,
		vault: vault,
		logs:  &syncBuffer{},
		keys:  map[store.KeyKind]string{},
	}
	for i, k := range []struct {
		kind    store.KeyKind
		account string
	}{{store.KeyAdmin, "admin"}, {store.KeyFull, "acct1"}, {store.KeyReadOnly, "acct1"}, {store.KeyFull, "acct1"}} {
		secret := "wr_" + randomHex()
		sum := sha256.Sum256([]byte(secret))
		id := "key-" + strconv.Itoa(i)
		if i == 3 {
			id = spareKeyID
		}
		err := st.PutKey(t.Context(), store.Key{
			ID: id, Account: k.account, Kind: k.kind, Hash: sum[:], CreatedAt: time.Now(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if id != spareKeyID {
			e.keys[k.kind] = secret
		}
	}
	e.fake.add("sbx-1", "acct1", sandbox.StateRunning)
	e.fake.add("sbx-admin", "admin", sandbox.StateRunning)
	if err := st.PutWebhook(t.Context(), &store.Webhook{ID: testWebhookID, Account: "acct1", URL: "https://hooks.example.test/", Events: []string{api.EventSandboxCreated}, Secret: "whsec_AAAA", CreatedAt: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}

	cfg := Config{
		Sandboxes: e.fake,
		Store:     st,
		Secrets:   vault,
		Templates: &fakeTemplates{},
		Volumes:   fakeVolumes{},
		Hooks:     st,
		// Every URL: the checks are internal/webhooks' (webhooks_test.go
		// holds the routes to using one).
		CheckWebhookURL: func(context.Context, string) error { return nil },
		Logger:          slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	e.handler = NewServer(cfg)
	srv := httptest.NewServer(checkedBySpec(t, e.handler))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// do sends a request with key (none when empty) and body.
func (e *testEnv) do(method, path, key string, body io.Reader) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// doJSON sends body as JSON text.
func (e *testEnv) doJSON(method, path, key, body string) *http.Response {
	e.t.Helper()
	return e.do(method, path, key, strings.NewReader(body))
}

// errorOf reads an error body, failing the test unless it is one.
func errorOf(t *testing.T, resp *http.Response) api.ErrorDetail {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	var body api.ErrorBody
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("decoding error body: %v", err)
	}
	if body.Error.Code == "" || body.Error.Message == "" {
		t.Errorf("error body %+v: want a code and a message", body)
	}
	return body.Error
}

// concrete fills a route pattern with ids of sandbox sbx-1 and of the
// spare key.
func concrete(pattern string) string {
	p := strings.ReplaceAll(pattern, api.Version+"/webhooks/{id}", api.Version+"/webhooks/"+testWebhookID)
	p = strings.ReplaceAll(p, "{id}", "sbx-1")
	p = strings.ReplaceAll(p, "{pid}", "42")
	p = strings.ReplaceAll(p, "{kid}", spareKeyID)
	p = strings.ReplaceAll(p, "{name}", testSecretName)
	p = strings.ReplaceAll(p, "{cid}", "default")
	p = strings.ReplaceAll(p, "{port}", "8000")
	p = strings.ReplaceAll(p, "{sid}", testSnapshotID)
	if strings.Contains(p, "/files") || strings.Contains(p, "/archive") {
		p += "?path=a.txt"
	}
	if strings.HasSuffix(p, "/templates/import") {
		p += "?name=app"
	}
	return p
}

// testWebhookID is acct1's webhook that newEnv registers.
const testWebhookID = "wh_test"

// bodyFor is a valid body for a route.
func bodyFor(rt Route) io.Reader {
	switch {
	case strings.HasSuffix(rt.Pattern, "/exec"):
		return strings.NewReader(`{"cmd":["true"]}`)
	case strings.HasSuffix(rt.Pattern, "/code"):
		return strings.NewReader(`{"code":"1"}`)
	case strings.HasSuffix(rt.Pattern, "/publish"):
		return strings.NewReader(`{"public":true}`)
	case strings.HasSuffix(rt.Pattern, "/snapshot"):
		return strings.NewReader(`{"template":"app"}`)
	case strings.HasSuffix(rt.Pattern, "/templates/import"):
		return strings.NewReader("image bytes")
	case strings.HasSuffix(rt.Pattern, "/extend"):
		return strings.NewReader(`{"timeout_seconds":60}`)
	case rt.Method == http.MethodPost && rt.Pattern == api.Version+"/sandboxes":
		return strings.NewReader(`{}`)
	case rt.Method == http.MethodPost && rt.Pattern == api.Version+"/volumes":
		return strings.NewReader(`{"name":"data","size_gib":1}`)
	case rt.Method == http.MethodPost && rt.Pattern == api.Version+"/webhooks":
		return strings.NewReader(`{"url":"https://hooks.example.test/","events":["sandbox.created"]}`)
	case rt.Method == http.MethodPost && rt.Pattern == api.Version+"/accounts":
		return strings.NewReader(`{"name":"acct-` + randomHex()[:8] + `"}`)
	case rt.Method == http.MethodPut && strings.HasSuffix(rt.Pattern, "/previews"):
		return strings.NewReader(`{"all_public":true}`)
	case rt.Method == http.MethodPut && strings.HasSuffix(rt.Pattern, "/previews/{port}"):
		return strings.NewReader(`{"public":true}`)
	case rt.Method == http.MethodPut && strings.HasSuffix(rt.Pattern, "/network"):
		return strings.NewReader(`{"internet":false}`)
	case rt.Method == http.MethodPut && strings.HasPrefix(rt.Pattern, api.Version+"/secrets/"):
		return strings.NewReader(`{"value":"` + testSecretValue + `","host":"api.example.org"}`)
	case rt.Method == http.MethodPut:
		return strings.NewReader("file bytes")
	}
	return nil
}

// syncBuffer is a log sink that handlers may write from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines decodes the JSON log lines.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// agentRequest is what the fake agent saw of one request.
type agentRequest struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
}

// fakeAgent plays the in-sandbox agent: it records what reaches it and
// answers a few routes the way the real one does.
type fakeAgent struct {
	srv *httptest.Server

	mu   sync.Mutex // guards reqs and execGate
	reqs []agentRequest
	// execGate, when set, holds an exec between its start event and the
	// rest until it is closed.
	execGate chan struct{}
}

func newFakeAgent(t *testing.T) *fakeAgent {
	a := &fakeAgent{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exec", a.exec)
	mux.HandleFunc("POST /code", a.code)
	mux.HandleFunc("GET /processes/{pid}/stream", a.follow)
	mux.HandleFunc("GET /files", a.readFile)
	mux.HandleFunc("PUT /files", a.writeFile)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.record(r, true)
		writeJSON(w, http.StatusOK, map[string]string{"agent": r.Method + " " + r.URL.Path})
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAgent) record(r *http.Request, readBody bool) {
	var body []byte
	if readBody {
		body, _ = io.ReadAll(r.Body)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, agentRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
}

func (a *fakeAgent) requests() []agentRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agentRequest(nil), a.reqs...)
}

func (a *fakeAgent) exec(w http.ResponseWriter, r *http.Request) {
	a.record(r, true)
	a.mu.Lock()
	gate := a.execGate
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	enc.Encode(api.ExecEvent{Type: api.EventStart, Pid: 7})
	w.(http.Flusher).Flush()
	if gate != nil {
		select {
		case <-gate:
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
			return
		}
	}
	code := 0
	enc.Encode(api.ExecEvent{Type: api.EventStdout, Data: "hi\n"})
	enc.Encode(api.ExecEvent{Type: api.EventExit, ExitCode: &code, DurationMs: 1})
}

// follow answers a background process's follow stream: it has exited.
func (a *fakeAgent) follow(w http.ResponseWriter, r *http.Request) {
	a.record(r, false)
	w.Header().Set("Content-Type", "application/x-ndjson")
	code := 0
	json.NewEncoder(w).Encode(api.ExecEvent{Type: api.EventExit, ExitCode: &code})
}

// code answers a cell by its code: "break" breaks the stream off after
// some output, "big" sends a result longer than an exec line may be,
// "hugeline" a line longer than a code line may be, "notstream" a 200
// that is not ndjson, and anything else prints and ends.
func (a *fakeAgent) code(w http.ResponseWriter, r *http.Request) {
	a.record(r, true)
	var req api.CodeRequest
	json.Unmarshal(a.requests()[len(a.requests())-1].Body, &req)
	if req.Code == "notstream" {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"type":"stdout","text":"` + strings.Repeat("x", 9<<20) + `"}` + "\n"))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if req.Code == "hugeline" {
		enc := json.NewEncoder(w)
		enc.Encode(api.CodeEvent{Type: api.CodeEventStdout, Text: "hi\n"})
		w.Write([]byte(`{"type":"stdout","text":"` + strings.Repeat("x", 9<<20) + `"}` + "\n"))
		return
	}
	enc := json.NewEncoder(w)
	enc.Encode(api.CodeEvent{Type: api.CodeEventStdout, Text: "hi\n"})
	w.(http.Flusher).Flush()
	switch req.Code {
	case "break":
		panic(http.ErrAbortHandler)
	case "big":
		enc.Encode(api.CodeEvent{Type: api.CodeEventResult, Result: &api.CodeResult{PNG: strings.Repeat("A", 1<<20)}})
	}
	enc.Encode(api.CodeEvent{Type: api.CodeEventEnd, ExecutionCount: 1})
}

// readFile serves ?size=N bytes, or with ?broken=1 breaks off mid-stream.
func (a *fakeAgent) readFile(w http.ResponseWriter, r *http.Request) {
	a.record(r, false)
	w.Header().Set("Content-Type", "application/octet-stream")
	if r.URL.Query().Get("broken") != "" {
		w.Write(bytes.Repeat([]byte("x"), 1000))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	size, _ := strconv.ParseInt(r.URL.Query().Get("size"), 10, 64)
	if size == 0 {
		io.WriteString(w, "file bytes")
		return
	}
	buf := bytes.Repeat([]byte("x"), 64<<10)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	for size > 0 {
		n := min(size, int64(len(buf)))
		if _, err := w.Write(buf[:n]); err != nil {
			return
		}
		size -= n
	}
}

func (a *fakeAgent) writeFile(w http.ResponseWriter, r *http.Request) {
	a.record(r, true)
	writeJSON(w, http.StatusOK, api.FileInfo{Name: "a.txt", Path: "/workspace/a.txt", Type: api.FileTypeFile})
}
