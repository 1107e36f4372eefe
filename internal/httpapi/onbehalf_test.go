package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/selfcall"
	"github.com/withruntime/withruntime/internal/store"
)

// translatorServer serves, on a loopback Listener with lim, a stand-in
// for the E2B layer wired as the real server wires it (Started outside,
// OnBehalf for its in-process calls): it passes each request on to the
// API of e in-process, and GET /fan?n=N makes N execs at once.
func translatorServer(t *testing.T, e *testEnv, lim admission.ConnLimits) (string, *admission.Listener) {
	t.Helper()
	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim.Logger = slog.New(slog.NewJSONHandler(e.logs, nil))
	l := admission.Listen(nl, lim)
	api := admission.OnBehalf(NewServer(Config{Sandboxes: e.fake, Store: e.store, Secrets: e.vault, Logger: lim.Logger}))
	hc := &http.Client{Transport: selfcall.Transport{Handler: api}}
	mux := http.NewServeMux()
	mux.Handle("/", &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "in-process" },
		Transport:     selfcall.Transport{Handler: api},
		FlushInterval: -1,
	})
	mux.HandleFunc("GET /fan", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://in-process/v1/sandboxes/sbx-1/exec", strings.NewReader(`{"cmd":["true"]}`))
				req.Header.Set("Authorization", r.Header.Get("Authorization"))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					return
				}
				statuses[i] = resp.StatusCode
				if resp.StatusCode == http.StatusOK {
					// Held until the gate opens: read its start event.
					resp.Body.Read(make([]byte, 1))
				}
				t.Cleanup(func() { resp.Body.Close() })
			})
		}
		wg.Wait()
		fmt.Fprint(w, statuses)
	})
	srv := l.HTTPServer(admission.Started(mux))
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return nl.Addr().String(), l
}

// A request of the translator whose key the API accepted is spared from
// eviction as a direct request is, under the key's account.
func TestOnBehalfSparesTheOuterConnection(t *testing.T) {
	e := newEnv(t, nil)
	release := gateExecs(t, e)
	addr, l := translatorServer(t, e, admission.ConnLimits{MaxConns: 3, MaxPerAccount: 3})
	key := e.keys[store.KeyFull]

	first := execInProgress(t, addr, key, "sbx-1")
	if all, ofAccount := sparedConns(l, "acct1"); all != 1 || ofAccount != 1 {
		t.Fatalf("spared connections: got %d (%d of acct1), want 1 (1)", all, ofAccount)
	}
	// Keyless clients fill the slots: they evict one another, never the
	// exec.
	slow := slowClient(t, addr, l)
	slowClient(t, addr, l)
	slowClient(t, addr, l)
	if !closedByServer(slow) {
		t.Fatal("the first slow client is still open, want it evicted")
	}
	for range 3 {
		slowClient(t, addr, l)
	}
	release()
	finish(t, first)
	eventually(t, "the spared connection is given back", func() bool {
		all, _ := sparedConns(l, "acct1")
		return all == 0
	})
}

// The translator's requests count against the account's share on its
// Listener, as direct requests do: past it they are refused, and another
// account still gets in.
func TestOnBehalfBoundsAnAccount(t *testing.T) {
	e := newEnv(t, nil)
	release := gateExecs(t, e)
	addr, l := translatorServer(t, e, admission.ConnLimits{MaxConns: 8, MaxPerAccount: 2})
	held := []func() (string, error){
		execInProgress(t, addr, e.keys[store.KeyFull], "sbx-1"),
		execInProgress(t, addr, e.keys[store.KeyFull], "sbx-1"),
	}
	_, resp := sendRaw(t, addr, execRequest(e.keys[store.KeyFull], "sbx-1"))
	if d := errorOf(t, resp); resp.StatusCode != http.StatusTooManyRequests || d.Code != "rate_limited" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a third exec of acct1: got %d %+v, want 429 rate_limited with Retry-After", resp.StatusCode, d)
	}
	other := execInProgress(t, addr, e.keys[store.KeyAdmin], "sbx-admin")
	if all, ofAccount := sparedConns(l, "acct1"); all != 3 || ofAccount != 2 {
		t.Errorf("spared connections: got %d (%d of acct1), want 3 (2)", all, ofAccount)
	}
	release()
	finish(t, append(held, other)...)
}

// One request of the translator cannot exceed the account's share of
// in-process requests by making many at once.
func TestOnBehalfSlotsBoundOneRequest(t *testing.T) {
	e := newEnv(t, nil)
	release := gateExecs(t, e)
	addr, _ := translatorServer(t, e, admission.ConnLimits{MaxConns: 8, MaxPerAccount: 2})
	_, resp := sendRaw(t, addr, "GET /fan?n=4 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+e.keys[store.KeyFull]+"\r\n\r\n")
	b, _ := io.ReadAll(resp.Body)
	ok, limited := strings.Count(string(b), "200"), strings.Count(string(b), "429")
	if ok != 2 || limited != 2 {
		t.Errorf("4 execs at once with a share of 2: got statuses %s, want two 200 and two 429", b)
	}
	release()
}
