package noderpc_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
)

type connKey struct{}

// serve runs handler as node nodeID of ca over mutual TLS on loopback and
// returns its address.
func serve(t *testing.T, ca *clusterpki.Authority, nodeID string, handler http.HandlerFunc) string {
	t.Helper()
	tc, err := ca.ServerTLS(nodeID)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: handler,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go srv.Serve(tls.NewListener(l, tc))
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

func authority(t *testing.T) *clusterpki.Authority {
	t.Helper()
	ca, err := clusterpki.New()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func client(t *testing.T, ca *clusterpki.Authority, nodeID, addr string) *noderpc.Client {
	t.Helper()
	tc, err := ca.ClientTLS(nodeID)
	if err != nil {
		t.Fatal(err)
	}
	c := noderpc.NewClient(nodeID, addr, tc)
	t.Cleanup(c.Close)
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func TestClientCalls(t *testing.T) {
	ca := authority(t)
	var mu sync.Mutex
	var got []string
	addr := serve(t, ca, "node1", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Proto)
		mu.Unlock()
		switch r.URL.Path {
		case noderpc.PathHealth:
			writeJSON(w, 200, noderpc.Health{Node: "node1", Epoch: 3})
		case noderpc.PathCreate:
			var req noderpc.CreateRequest
			json.NewDecoder(r.Body).Decode(&req)
			writeJSON(w, 201, sandbox.Record{ID: "sb1", Account: req.Account, KeyID: req.KeyID, Node: "node1"})
		case "/node/v1/sandboxes/sb1/extend":
			var req noderpc.OpRequest
			json.NewDecoder(r.Body).Decode(&req)
			if req.TimeoutMs != 60000 {
				writeJSON(w, 400, api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_request", Message: "bad timeout"}})
				return
			}
			writeJSON(w, 200, sandbox.Record{ID: "sb1", Account: req.Account})
		case "/node/v1/sandboxes/sb1/network":
			writeJSON(w, 200, sandbox.Record{ID: "sb1"})
		case "/node/v1/sandboxes/sb1/egress":
			writeJSON(w, 200, []api.EgressEvent{{Kind: "dns", Name: r.URL.Query().Get("account")}})
		default:
			writeJSON(w, 409, api.ErrorBody{Error: api.ErrorDetail{Code: "conflict", Message: "cannot pause sandbox sb2 while it is paused"}})
		}
	})
	c := client(t, ca, "node1", addr)
	ctx := t.Context()

	h, err := c.Health(ctx)
	if err != nil || h.Node != "node1" || h.Epoch != 3 {
		t.Fatalf("health: got %+v, %v; want node1 epoch 3", h, err)
	}
	rec, err := c.Create(ctx, noderpc.CreateRequest{Account: "acct", KeyID: "key"})
	if err != nil || rec.ID != "sb1" || rec.Account != "acct" || rec.KeyID != "key" {
		t.Fatalf("create: got %+v, %v", rec, err)
	}
	if rec, err := c.Op(ctx, "sb1", noderpc.OpExtend, noderpc.OpRequest{Account: "acct", TimeoutMs: 60000}); err != nil || rec.Account != "acct" {
		t.Fatalf("extend: got %+v, %v", rec, err)
	}
	if _, err := c.SetNetwork(ctx, "sb1", noderpc.NetworkRequest{Account: "acct"}); err != nil {
		t.Fatalf("set network: %v", err)
	}
	evs, err := c.Egress(ctx, "acct", "sb1")
	if err != nil || len(evs) != 1 || evs[0].Name != "acct" {
		t.Fatalf("egress: got %+v, %v; want one event naming acct", evs, err)
	}
	_, err = c.Op(ctx, "sb2", noderpc.OpPause, noderpc.OpRequest{Account: "acct"})
	if k, m := sandbox.KindOf(err), sandbox.MessageOf(err); k != sandbox.KindConflict || m != "cannot pause sandbox sb2 while it is paused" {
		t.Errorf("node's refusal: got %s %q, want conflict and the node's message", k, m)
	}
	if noderpc.IsTransportError(err) || noderpc.IsDialError(err) {
		t.Errorf("an answer counts as a transport error: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got {
		if !strings.HasSuffix(g, "HTTP/2.0") {
			t.Errorf("request %q: want HTTP/2", g)
		}
	}
	if want := "GET /node/v1/sandboxes/sb1/egress?account=acct HTTP/2.0"; !strings.Contains(strings.Join(got, "\n"), want) {
		t.Errorf("requests %q lack %q", got, want)
	}
}

func TestClientFailures(t *testing.T) {
	ca := authority(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	var dropped sync.WaitGroup
	dropper := serve(t, ca, "node1", func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		r.Context().Value(connKey{}).(net.Conn).Close()
		dropped.Done()
	})
	big := serve(t, ca, "node1", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.Write([]byte(`{"node":"`))
		w.Write([]byte(strings.Repeat("x", noderpc.MaxResponseBytes)))
	})
	notJSON := serve(t, ca, "node1", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	})
	other := serve(t, authority(t), "node1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, noderpc.Health{Node: "node1"})
	})
	wrongNode := serve(t, ca, "node2", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, noderpc.Health{Node: "node2"})
	})

	tests := []struct {
		name            string
		addr            string
		dial, transport bool
		kind            sandbox.Kind
	}{
		{"connection refused", refused, true, true, sandbox.KindInternal},
		{"node of another authority", other, true, true, sandbox.KindInternal},
		{"another node's certificate", wrongNode, true, true, sandbox.KindInternal},
		{"dropped after the request", dropper, false, true, sandbox.KindInternal},
		{"answer too large", big, false, false, sandbox.KindInternal},
		{"answer not in the envelope", notJSON, false, false, sandbox.KindInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.addr == dropper {
				dropped.Add(1)
			}
			_, err := client(t, ca, "node1", tt.addr).Create(t.Context(), noderpc.CreateRequest{Account: "a"})
			if err == nil {
				t.Fatal("got no error")
			}
			if got := noderpc.IsDialError(err); got != tt.dial {
				t.Errorf("IsDialError(%v): got %v, want %v", err, got, tt.dial)
			}
			if got := noderpc.IsTransportError(err); got != tt.transport {
				t.Errorf("IsTransportError(%v): got %v, want %v", err, got, tt.transport)
			}
			if got := sandbox.KindOf(err); got != tt.kind {
				t.Errorf("kind: got %s, want %s", got, tt.kind)
			}
		})
	}
	dropped.Wait()
}

func TestAgentTransport(t *testing.T) {
	ca := authority(t)
	type seen struct {
		path, query, account, auth, cookie string
	}
	seenc := make(chan seen, 1)
	addr := serve(t, ca, "node1", func(w http.ResponseWriter, r *http.Request) {
		seenc <- seen{r.URL.Path, r.URL.RawQuery, r.Header.Get(noderpc.HeaderAccount), r.Header.Get("Authorization"), r.Header.Get("Cookie")}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(200)
		// Full duplex: each line of the request is answered before the
		// next is sent.
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			w.Write([]byte(`{"echo":"` + sc.Text() + `"}` + "\n"))
			w.(http.Flusher).Flush()
		}
		w.Write([]byte(`{"exit":0}` + "\n"))
	})
	rt := client(t, ca, "node1", addr).AgentTransport("acct", "sb1")
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://sandbox-agent/exec?wait=1&x=a%2Fb", pr)
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Cookie", "c=1")
	req.Header.Set("Connection", "keep-alive")
	errc := make(chan error, 1)
	go func() { _, err := pw.Write([]byte("one\n")); errc <- err }()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := <-seenc
	if want := (seen{"/node/v1/sandboxes/sb1/agent/exec", "wait=1&x=a%2Fb", "acct", "", ""}); s != want {
		t.Errorf("node saw %+v, want %+v", s, want)
	}
	lines := bufio.NewReader(resp.Body)
	read := func() string {
		l, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		return strings.TrimSpace(l)
	}
	if got := read(); got != `{"echo":"one"}` {
		t.Errorf("first line: got %s", got)
	}
	// The second line is only sent now that the first came back: the
	// bodies stream both ways.
	go func() { pw.Write([]byte("two\n")); pw.Close() }()
	if got := read(); got != `{"echo":"two"}` {
		t.Errorf("second line: got %s", got)
	}
	if got := read(); got != `{"exit":0}` {
		t.Errorf("last line: got %s", got)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("Authorization") == "" {
		t.Error("the round tripper changed the caller's request")
	}

	_, err = client(t, ca, "node1", "127.0.0.1:1").AgentTransport("acct", "sb1").RoundTrip(mustRequest(t))
	if !noderpc.IsDialError(err) {
		t.Errorf("agent call to nowhere: got %v, want a dial error", err)
	}
}

func mustRequest(t *testing.T) *http.Request {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://sandbox-agent/files/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
