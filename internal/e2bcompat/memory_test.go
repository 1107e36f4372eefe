package e2bcompat

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/membudget"
)

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// sampleHeap samples liveHeap every interval until stop is called, which
// returns the most it saw.
func sampleHeap(every time.Duration) (stop func() uint64) {
	quit, done := make(chan struct{}), make(chan struct{})
	var peak uint64
	go func() {
		defer close(done)
		for {
			peak = max(peak, liveHeap())
			select {
			case <-quit:
				return
			case <-time.After(every):
			}
		}
	}()
	return func() uint64 {
		close(quit)
		<-done
		return peak
	}
}

// hostileAPI is withruntime's API as a sandbox whose root poses as its
// agent makes it answer (the API streams an agent's answers through
// unbuffered, so faking the API's answer is faking the agent's): sandbox
// "run" of key wr_good and "run2" of key wr_other run; a stat of /big or a
// listing of /biglist is size bytes dribbled in 64 KiB writes and never
// ended, held until the request ends (settled is told once it is written
// or cut); any other path gets a small answer, a directory to stat.
func hostileAPI(size int, settled chan<- struct{}) http.Handler {
	owner := map[string]string{"run": "Bearer wr_good", "run2": "Bearer wr_other"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if owner[r.PathValue("id")] != r.Header.Get("Authorization") {
			apiError(w, 404, "not_found", "no such sandbox")
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"id": r.PathValue("id"), "state": "running"})
	})
	small := api.FileInfo{Name: "a", Path: "/home/user/a", Type: api.FileTypeFile, Size: 1, Mode: 0o644, ModTime: time.Unix(1700000000, 0).UTC()}
	dribble := func(w http.ResponseWriter, r *http.Request, head, unit string) {
		var once sync.Once
		settle := func() { once.Do(func() { settled <- struct{}{} }) }
		defer settle()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat(unit, (64<<10)/len(unit)))
		if _, err := w.Write([]byte(head)); err != nil {
			return
		}
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the reader cut the answer
			}
			time.Sleep(time.Millisecond)
		}
		settle()
		<-r.Context().Done()
	}
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") == "/big" {
			dribble(w, r, `{"name":"big","type":"file","path":"/`, "p")
			return
		}
		dir := small
		dir.Type = api.FileTypeDir
		json.NewEncoder(w).Encode(dir)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/list", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") == "/biglist" {
			dribble(w, r, `{"entries":[`, `{"name":"f","path":"/big/f","type":"file","size":1,"mode":420,"mtime":"2026-01-01T00:00:00Z"},`)
			return
		}
		json.NewEncoder(w).Encode(api.FileList{Entries: []api.FileInfo{small}})
	})
	return mux
}

// fsCall is one filesystem RPC of sandbox id with key's token: its status
// and body.
func fsCall(s *Server, id, key, method, body string) (int, string) {
	r, _ := http.NewRequest("POST", "http://e2b.test/filesystem.Filesystem/"+method, strings.NewReader(body))
	r.Header.Set(headerSandboxID, id)
	r.Header.Set(headerSandboxPort, EnvdPort)
	r.Header.Set(headerAccessToken, s.sealToken(id, key))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Connect-Protocol-Version", "1")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// Held Stat and ListDir calls whose answers a fake agent makes tens of
// MiB hold no more than the account's share of the server's memory: a
// stat answer is cut at 64 KiB, listings past the share are refused with
// resource_exhausted (429), another account's calls still answer, and
// every reservation is given back. Before, 8 held Stat calls held 8
// answers whole (about 200 MiB here) and listings as much as they grew.
func TestHeldAnswersWithinBudget(t *testing.T) {
	const (
		size  = 16 << 20
		share = 32 << 20
		slack = 16 << 20
	)
	for _, tt := range []struct {
		name, method string
		path         string
		calls        int
		wantStatus   int
		wantText     string
	}{
		{"Stat", "Stat", "/big", 8, http.StatusInternalServerError, "answer too large"},
		{"ListDir", "ListDir", "/biglist", 4, http.StatusTooManyRequests, "rate_limited"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			budget, err := membudget.NewWith(membudget.Limits{Total: 4 * share, Account: share, Sandbox: share})
			if err != nil {
				t.Fatal(err)
			}
			settled := make(chan struct{}, tt.calls)
			s, err := New(Config{API: hostileAPI(size, settled), Secret: bytes.Repeat([]byte{9}, SecretSize), Memory: budget})
			if err != nil {
				t.Fatal(err)
			}
			base := liveHeap()
			stop := sampleHeap(50 * time.Millisecond)
			type answer struct {
				code int
				body string
			}
			answers := make(chan answer, tt.calls)
			for range tt.calls {
				go func() {
					code, body := fsCall(s, "run", "wr_good", tt.method, `{"path":"`+tt.path+`"}`)
					answers <- answer{code, body}
				}()
			}
			for range tt.calls {
				select {
				case <-settled:
				case <-time.After(60 * time.Second):
					t.Fatal("answers still being written after 60s")
				}
			}
			time.Sleep(300 * time.Millisecond)
			if code, body := fsCall(s, "run2", "wr_other", tt.method, `{"path":"/home/user"}`); code != http.StatusOK {
				t.Errorf("another account's %s: got %d %s, want 200", tt.method, code, body)
			}
			peak := stop()
			grew := int64(peak) - int64(base)
			t.Logf("heap: %d MiB before, %d MiB at most while %d %s calls were answered %d MiB each (grew %d MiB; share %d MiB)",
				base>>20, peak>>20, tt.calls, tt.method, size>>20, grew>>20, share>>20)
			if grew > share+slack {
				t.Errorf("heap grew %d MiB, want at most the account's share %d MiB + %d MiB", grew>>20, share>>20, slack>>20)
			}
			for range tt.calls {
				select {
				case a := <-answers:
					if a.code != tt.wantStatus || !strings.Contains(a.body, tt.wantText) {
						t.Errorf("%s past the bound: got %d %.200s, want %d naming %q", tt.method, a.code, a.body, tt.wantStatus, tt.wantText)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s of %s still held after 10s: want it refused", tt.method, tt.path)
				}
			}
			if used, _, _ := budget.Used("", ""); used != 0 {
				t.Errorf("reserved after every call ended: got %d, want 0", used)
			}
		})
	}
}
