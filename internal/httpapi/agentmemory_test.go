package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/membudget"
	"github.com/withruntime/withruntime/internal/store"
)

// heapSampler samples the live heap (after a collection) until stopped
// and keeps the most it saw.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func sampleHeap(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			h.peak = max(h.peak, liveHeap())
			select {
			case <-h.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	return h
}

func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

// hostileCodeAgent answers a cell whose code is "big" with one stdout line
// of size bytes that it dribbles in 64 KiB writes and never ends, holding
// the stream until the request ends; any other cell gets a short stream.
// It stands in for root's program posing as the agent (a real one cannot
// be made to hold a line open here).
func hostileCodeAgent(t *testing.T, size int, settled chan<- struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/files/list" {
			hostileListing(w, r, size, settled)
			return
		}
		var req api.CodeRequest
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/x-ndjson")
		if req.Code != "big" {
			enc := json.NewEncoder(w)
			enc.Encode(api.CodeEvent{Type: api.CodeEventStdout, Text: "small"})
			enc.Encode(api.CodeEvent{Type: api.CodeEventEnd, ExecutionCount: 1})
			return
		}
		var once sync.Once
		settle := func() { once.Do(func() { settled <- struct{}{} }) }
		defer settle()
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("x", 64<<10))
		if _, err := w.Write([]byte(`{"type":"stdout","text":"`)); err != nil {
			return
		}
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the server cut the stream
			}
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
		settle()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// hostileListing answers a listing of path "/big" with size bytes of
// entries that it dribbles and never ends, holding the answer until the
// request ends; any other path gets one entry.
func hostileListing(w http.ResponseWriter, r *http.Request, size int, settled chan<- struct{}) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("path") != "/big" {
		w.Write([]byte(`{"entries":[{"name":"a","path":"/w/a","type":"file","size":1,"mode":420,"mtime":"2026-01-01T00:00:00Z"}]}`))
		return
	}
	var once sync.Once
	settle := func() { once.Do(func() { settled <- struct{}{} }) }
	defer settle()
	w.WriteHeader(http.StatusOK)
	entry := `{"name":"f","path":"/big/f","type":"file","size":1,"mode":420,"mtime":"2026-01-01T00:00:00Z"},`
	chunk := []byte(strings.Repeat(entry, (64<<10)/len(entry)))
	if _, err := w.Write([]byte(`{"entries":[`)); err != nil {
		return
	}
	for n := 0; n < size; n += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		time.Sleep(time.Millisecond)
	}
	settle()
	<-r.Context().Done()
}

// codeEvents posts a cell and returns the stream's events' types and the
// code of its error event, if any.
func codeEvents(ctx context.Context, url, key, id, code string) (types []string, errCode string, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/sandboxes/"+id+"/code", strings.NewReader(`{"code":"`+code+`"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev api.CodeEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		types = append(types, ev.Type)
		if ev.Error != nil {
			errCode = ev.Error.Code
		}
	}
	return types, errCode, sc.Err()
}

// Held code streams of one account, each with a line near the 8 MiB
// bound, hold at most the account's share of the server's memory: the
// streams past it end with rate_limited, while another account's cell
// still runs; everything is given back when they end. Before the budget,
// 16 such streams held 16 lines (about 140 MiB here).
func TestCodeStreamsHeldWithinBudget(t *testing.T) {
	const (
		streams = 16
		line    = 7 << 20
		share   = 32 << 20
		slack   = 16 << 20
	)
	budget, err := membudget.NewWith(membudget.Limits{Total: 4 * share, Account: share, Sandbox: share})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.AgentMemory = budget })
	settled := make(chan struct{}, streams)
	agent := hostileCodeAgent(t, line, settled)
	e.fake.mu.Lock()
	e.fake.agentAddr = agent.Listener.Addr().String()
	e.fake.mu.Unlock()

	base := liveHeap()
	sampler := sampleHeap(50 * time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		types   []string
		errCode string
	}
	results := make(chan result, streams)
	for range streams {
		go func() {
			types, code, _ := codeEvents(ctx, e.url, e.keys[store.KeyFull], "sbx-1", "big")
			results <- result{types, code}
		}()
	}
	// Every stream is either cut or written whole and held.
	for range streams {
		select {
		case <-settled:
		case <-time.After(60 * time.Second):
			t.Fatal("streams still being written after 60s")
		}
	}
	time.Sleep(300 * time.Millisecond) // the guards read what is in flight

	// Another account's cell runs meanwhile.
	types, code, err := codeEvents(t.Context(), e.url, e.keys[store.KeyAdmin], "sbx-admin", "small")
	if err != nil || code != "" || strings.Join(types, ",") != "stdout,end" {
		t.Errorf("another account's cell: got %v %q %v, want stdout,end", types, code, err)
	}
	peak := sampler.Stop()
	grew := int64(peak) - int64(base)
	t.Logf("heap: %d MiB before, %d MiB at most while %d streams held lines of %d MiB (grew %d MiB; share %d MiB)",
		base>>20, peak>>20, streams, line>>20, grew>>20, share>>20)
	if grew > share+slack {
		t.Errorf("heap grew %d MiB, want at most the account's share %d MiB + %d MiB", grew>>20, share>>20, slack>>20)
	}
	_, byAccount, _ := budget.Used("acct1", "sbx-1")
	if byAccount > share {
		t.Errorf("reserved by the account: got %d, want at most %d", byAccount, share)
	}

	cancel()
	refused := 0
	for range streams {
		r := <-results
		if r.errCode != "" {
			if r.errCode != "rate_limited" {
				t.Errorf("a cut stream's error: got %q, want rate_limited", r.errCode)
			}
			refused++
		}
	}
	t.Logf("%d of %d streams cut with rate_limited", refused, streams)
	if refused < streams-share/line {
		t.Errorf("streams refused: got %d, want at least %d", refused, streams-share/line)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, _, _ := budget.Used("", "")
		if used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reserved after every stream ended: got %d, want 0", used)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Held MCP listings of one account, each answer tens of MiB that the
// in-process client reads whole, hold at most the account's share: the
// calls past it fail with rate_limited, another account's listing still
// answers, and everything is given back. Before the budget, 4 such calls
// held 4 answers (about 140 MiB here).
func TestMCPListingsHeldWithinBudget(t *testing.T) {
	const (
		calls   = 4
		listing = 24 << 20
		share   = 32 << 20
		slack   = 16 << 20
	)
	budget, err := membudget.NewWith(membudget.Limits{Total: 4 * share, Account: share, Sandbox: share})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.AgentMemory = budget })
	settled := make(chan struct{}, calls)
	agent := hostileCodeAgent(t, listing, settled)
	e.fake.mu.Lock()
	e.fake.agentAddr = agent.Listener.Addr().String()
	e.fake.mu.Unlock()

	base := liveHeap()
	sampler := sampleHeap(50 * time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	texts := make(chan string, calls)
	for range calls {
		cs := e.mcpSession(e.keys[store.KeyFull])
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_list_files", Arguments: map[string]any{"sandbox_id": "sbx-1", "path": "/big"}})
			switch {
			case err != nil:
				texts <- "call: " + err.Error()
			case len(res.Content) > 0:
				tc, _ := res.Content[0].(*mcp.TextContent)
				texts <- tc.Text
			default:
				texts <- ""
			}
		}()
	}
	for range calls {
		select {
		case <-settled:
		case <-time.After(60 * time.Second):
			t.Fatal("listings still being written after 60s")
		}
	}
	time.Sleep(300 * time.Millisecond)

	other := e.mcpSession(e.keys[store.KeyAdmin])
	res, text, _ := callTool(t, other, "sandbox_list_files", map[string]any{"sandbox_id": "sbx-admin", "path": "/w"})
	if res.IsError || !strings.Contains(text, `"name":"a"`) {
		t.Errorf("another account's listing: got %s, want its entry", text)
	}
	peak := sampler.Stop()
	grew := int64(peak) - int64(base)
	t.Logf("heap: %d MiB before, %d MiB at most while %d MCP listings of %d MiB were held (grew %d MiB; share %d MiB)",
		base>>20, peak>>20, calls, listing>>20, grew>>20, share>>20)
	if grew > share+slack {
		t.Errorf("heap grew %d MiB, want at most the account's share %d MiB + %d MiB", grew>>20, share>>20, slack>>20)
	}
	refused := 0
	for range calls {
		select {
		case text := <-texts:
			if !strings.HasPrefix(text, "rate_limited: ") {
				t.Errorf("a listing past the share: got %q, want a rate_limited tool error", text)
			}
			refused++
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("%d of %d listings refused with rate_limited while held", refused, calls)
	if refused < calls-1 {
		t.Errorf("listings refused: got %d, want at least %d", refused, calls-1)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, _, _ := budget.Used("", "")
		if used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reserved after every call ended: got %d, want 0", used)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
