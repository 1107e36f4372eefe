package e2bcompat

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// bigDirAPI is the files API of sandbox "run" with directory
// /home/user/d of n symbolic links with long names and targets. It
// honours ?limit= as the API does and records the largest it was sent;
// while gate is not nil, each listing waits on it, counted in inList.
type bigDirAPI struct {
	listing  []byte
	n        int
	gate     chan struct{}
	inList   atomic.Int32
	maxIn    atomic.Int32
	maxLimit atomic.Int64
}

func newBigDirAPI(n int) *bigDirAPI {
	var sb strings.Builder
	name, target := strings.Repeat("n", 250), strings.Repeat("t", 4000)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"name":"%s%d","path":"/home/user/d/%s%d","type":"symlink","size":1,"mode":511,"mtime":"2024-01-01T00:00:00Z","target":"/%s%d"}`,
			name, i, name, i, target, i)
	}
	return &bigDirAPI{listing: []byte(sb.String()), n: n}
}

func (b *bigDirAPI) handler() http.Handler {
	mux := fakeAPI().(*http.ServeMux)
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"name":"d","path":"/home/user/d","type":"dir","mode":493}`))
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/list", func(w http.ResponseWriter, r *http.Request) {
		in := b.inList.Add(1)
		defer b.inList.Add(-1)
		for m := b.maxIn.Load(); in > m && !b.maxIn.CompareAndSwap(m, in); m = b.maxIn.Load() {
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		for m := b.maxLimit.Load(); int64(limit) > m && !b.maxLimit.CompareAndSwap(m, int64(limit)); m = b.maxLimit.Load() {
		}
		if b.gate != nil {
			select {
			case <-b.gate:
			case <-r.Context().Done():
				// Not the API's code for it: the layer must not rely on one.
				apiError(w, http.StatusInternalServerError, "internal", "cut short")
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if limit > 0 && limit < b.n {
			// The API cuts at limit: a prefix of whole entries.
			cut, i := 0, 0
			for ; i < limit; i++ {
				cut += bytes.IndexByte(b.listing[cut:], '}') + 2
			}
			fmt.Fprintf(w, `{"entries":[%s],"truncated":true}`, b.listing[:cut-1])
			return
		}
		fmt.Fprintf(w, `{"entries":[%s]}`, b.listing)
	})
	return mux
}

func bigDirRequest(s *Server, method, body string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/filesystem.Filesystem/"+method, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerSandboxID, "run")
	req.Header.Set(headerAccessToken, s.sealToken("run", "wr_good"))
	return req
}

// TestWatchersKeepDigests: 16 polled watchers of a directory whose
// listing is 8 MiB keep a digest of it each, not the listing.
func TestWatchersKeepDigests(t *testing.T) {
	api := newBigDirAPI(2000)
	s, err := New(Config{API: api.handler(), Secret: bytes.Repeat([]byte{7}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	for i := range maxWatchesPerSandbox {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, bigDirRequest(s, "CreateWatcher", `{"path":"d"}`))
		if w.Code != http.StatusOK {
			t.Fatalf("watcher %d: got %d %s, want 200", i, w.Code, w.Body)
		}
	}
	grew := heapInUse() - before
	runtime.KeepAlive(s) // what it holds is what is measured
	if grew > 40<<20 {
		t.Errorf("got the heap %d MiB larger with %d watchers of an 8 MiB listing, want under 40 MiB", grew>>20, maxWatchesPerSandbox)
	}
}

// TestListDirBounded: an account's listings run at most
// maxListsPerAccount at once, each asking the API for no more entries
// than ListDir may answer, and a directory with more is refused.
func TestListDirBounded(t *testing.T) {
	api := newBigDirAPI(maxListed + 5)
	api.gate = make(chan struct{})
	s, err := New(Config{API: api.handler(), Secret: bytes.Repeat([]byte{7}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	const calls = 6
	var wg sync.WaitGroup
	codes := make([]int, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := httptest.NewRecorder()
			s.ServeHTTP(w, bigDirRequest(s, "ListDir", `{"path":"d"}`))
			codes[i] = w.Code
		}()
	}
	for range calls {
		api.gate <- struct{}{}
	}
	wg.Wait()
	if got := api.maxIn.Load(); got > maxListsPerAccount {
		t.Errorf("got %d listings of one account at once, want at most %d", got, maxListsPerAccount)
	}
	if got := api.maxLimit.Load(); got == 0 || got > maxListed+1 {
		t.Errorf("got limit=%d asked of the API, want 1 to %d", got, maxListed+1)
	}
	for i, c := range codes {
		if c != http.StatusBadRequest {
			t.Errorf("ListDir %d of %d entries: got %d, want 400", i, maxListed+5, c)
		}
	}
}

// TestSandboxAlive: a watcher's sandbox is alive while it runs for the
// watcher's key; paused, gone or a refused key is dead.
func TestSandboxAlive(t *testing.T) {
	s, err := New(Config{API: fakeAPI(), Secret: bytes.Repeat([]byte{7}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		box, key string
		want     bool
	}{{"run", "wr_good", true}, {"zzz", "wr_good", false}, {"gone", "wr_good", false}, {"run", "wr_revoked", false}} {
		w := &watcher{sb: &Sandbox{ID: c.box, C: s.client(c.key)}}
		if got := sandboxAlive(w); got != c.want {
			t.Errorf("sandbox %s, key %s: got alive %v, want %v", c.box, c.key, got, c.want)
		}
	}
}
