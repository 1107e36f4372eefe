package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

const testNode = "node0000beef"

// rig is a node RPC server on a real TLS listener on loopback.
type rig struct {
	auth  *clusterpki.Authority
	mgr   *fakeManager
	state *fixedState
	url   string
}

func newRig(t *testing.T) *rig { return newRigWith(t, nil) }

// newRigWith is newRig with the handler's configuration changed by set
// (nil: as it is).
func newRigWith(t *testing.T, set func(*Config)) *rig {
	t.Helper()
	auth, err := clusterpki.New()
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := auth.ServerTLS(testNode)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{auth: auth, mgr: &fakeManager{}, state: &fixedState{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Node: testNode, Sandboxes: r.mgr, State: r.state}
	if set != nil {
		set(&cfg)
	}
	srv := NewServer(NewHandler(cfg), tlsCfg, nil)
	go Serve(srv, l)
	t.Cleanup(func() { srv.Close() })
	r.url = "https://" + l.Addr().String()
	return r
}

// client is an HTTP/2 client with tlsCfg.
func client(t *testing.T, tlsCfg *tls.Config) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// apiClient is a client with the authority's API certificate.
func (r *rig) apiClient(t *testing.T) *http.Client {
	t.Helper()
	cfg, err := r.auth.ClientTLS(testNode)
	if err != nil {
		t.Fatal(err)
	}
	return client(t, cfg)
}

func postJSON(t *testing.T, c *http.Client, url string, v any) (*http.Response, []byte) {
	t.Helper()
	body, _ := json.Marshal(v)
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// Only a caller holding the installation's API certificate is served.
func TestRPCRefusesCallersWithoutAPICertificate(t *testing.T) {
	r := newRig(t)
	other, err := clusterpki.New()
	if err != nil {
		t.Fatal(err)
	}
	otherCfg, err := other.ClientTLS(testNode)
	if err != nil {
		t.Fatal(err)
	}
	// This caller would refuse the node (another authority); let it
	// through so that the node's refusal is what is tested.
	otherCfg.VerifyConnection = nil
	nodeSrv, err := r.auth.ServerTLS("node0000cafe")
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, err := nodeSrv.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  *tls.Config
	}{
		{"no certificate", &tls.Config{InsecureSkipVerify: true}},
		{"another authority's API certificate", otherCfg},
		{"a node certificate of this authority", &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{*nodeCert}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(noderpc.OpRequest{Account: "acct"})
			resp, err := client(t, tt.cfg).Post(r.url+"/node/v1/sandboxes/sb1/stop", "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got status %d, want the handshake refused", resp.StatusCode)
			}
			// The node is the one that refuses: its alert arrives once
			// the caller's side of the handshake is done.
			cfg := tt.cfg.Clone()
			cfg.NextProtos = []string{"h2"}
			conn, err := tls.Dial("tcp", strings.TrimPrefix(r.url, "https://"), cfg)
			if err == nil {
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "remote error: tls:") {
				t.Fatalf("got %v, want the node's TLS alert", err)
			}
		})
	}
	if calls := r.mgr.Calls(); len(calls) != 0 {
		t.Fatalf("got manager calls %q, want none", calls)
	}
	// The control: the API's certificate is served, over HTTP/2.
	resp, b := postJSON(t, r.apiClient(t), r.url+"/node/v1/sandboxes/sb1/stop", noderpc.OpRequest{Account: "acct"})
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("api caller: got %d %s %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto, b)
	}
	if calls := r.mgr.Calls(); !slices.Equal(calls, []string{"stop acct sb1"}) {
		t.Fatalf("got manager calls %q, want the api caller's stop", calls)
	}
}

func TestRPCCreateAndOps(t *testing.T) {
	r := newRig(t)
	c := r.apiClient(t)
	resp, b := postJSON(t, c, r.url+noderpc.PathCreate, noderpc.CreateRequest{Account: "acct", KeyID: "key1", Request: service.CreateRequest{Image: "python"}})
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), `"id":"sb1"`) {
		t.Fatalf("create: got %d %s, want 201 and the record", resp.StatusCode, b)
	}
	for _, op := range []string{noderpc.OpStop, noderpc.OpPause, noderpc.OpResume, noderpc.OpExtend, noderpc.OpSetLease} {
		resp, b := postJSON(t, c, r.url+"/node/v1/sandboxes/sb2/"+op, noderpc.OpRequest{Account: "acct", TimeoutMs: 60000})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: got %d %s, want 200", op, resp.StatusCode, b)
		}
	}
	want := []string{"create acct key1 python", "stop acct sb2", "pause acct sb2", "resume acct sb2", "extend acct sb2 1m0s", "set_lease acct sb2 1m0s"}
	if got := r.mgr.Calls(); !slices.Equal(got, want) {
		t.Fatalf("got calls %q, want %q", got, want)
	}
}

// A create's volumes are the node's own: resolved again there from their
// names, whatever host dir the caller sent, claimed until the create is
// done; a node without volumes refuses them.
func TestRPCCreateResolvesVolumes(t *testing.T) {
	var released, resolved int
	r := newRigWith(t, func(c *Config) {
		c.Volumes = func(_ context.Context, account string, ms []sandbox.VolumeMount) ([]sandbox.VolumeMount, func(), error) {
			resolved++
			out := slices.Clone(ms)
			for i := range out {
				out[i].ID, out[i].HostDir = "vol-"+out[i].Name, "/node/volumes/"+account+"/"+out[i].Name
			}
			return out, func() { released++ }, nil
		}
	})
	c := r.apiClient(t)
	req := service.CreateRequest{Volumes: []sandbox.VolumeMount{{Name: "data", Path: "/data", HostDir: "/etc"}}}
	resp, b := postJSON(t, c, r.url+noderpc.PathCreate, noderpc.CreateRequest{Account: "acct", KeyID: "key1", Request: req})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create with a volume: got %d %s", resp.StatusCode, b)
	}
	if want := []string{"create acct key1  vol-data@/node/volumes/acct/data"}; !slices.Equal(r.mgr.Calls(), want) || resolved != 1 || released != 1 {
		t.Fatalf("got calls %q (resolved %d, released %d), want %q, one claim released", r.mgr.Calls(), resolved, released, want)
	}

	plain := newRig(t)
	resp, b = postJSON(t, plain.apiClient(t), plain.url+noderpc.PathCreate, noderpc.CreateRequest{Account: "acct", Request: req})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), "not_supported") || len(plain.mgr.Calls()) != 0 {
		t.Fatalf("create with a volume on a node without: got %d %s, calls %q", resp.StatusCode, b, plain.mgr.Calls())
	}
}

// A manager's error reaches the caller as the API's envelope with the
// API's status, and a fenced node refuses: creates as capacity, the rest
// as conflict.
func TestRPCErrors(t *testing.T) {
	r := newRig(t)
	c := r.apiClient(t)
	r.mgr.err = errNotFound
	resp, b := postJSON(t, c, r.url+"/node/v1/sandboxes/sb9/stop", noderpc.OpRequest{Account: "acct"})
	if got := errorCode(t, b); resp.StatusCode != http.StatusNotFound || got != "not_found" {
		t.Fatalf("stop of a missing sandbox: got %d %s, want 404 not_found", resp.StatusCode, b)
	}
	resp, b = postJSON(t, c, r.url+"/node/v1/sandboxes/sb9/explode", noderpc.OpRequest{Account: "acct"})
	if resp.StatusCode != http.StatusNotFound || errorCode(t, b) != "not_found" {
		t.Fatalf("unknown op: got %d %s, want 404 not_found", resp.StatusCode, b)
	}
	big := noderpc.CreateRequest{Account: strings.Repeat("a", MaxBodyBytes)}
	resp, b = postJSON(t, c, r.url+noderpc.PathCreate, big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || errorCode(t, b) != "payload_too_large" {
		t.Fatalf("oversized body: got %d %s, want 413 payload_too_large", resp.StatusCode, b)
	}

	r.mgr.err = nil
	r.state.set(true)
	resp, b = postJSON(t, c, r.url+noderpc.PathCreate, noderpc.CreateRequest{Account: "acct"})
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, b) != "capacity_exhausted" {
		t.Fatalf("fenced create: got %d %s, want 503 capacity_exhausted", resp.StatusCode, b)
	}
	resp, b = postJSON(t, c, r.url+"/node/v1/sandboxes/sb1/stop", noderpc.OpRequest{Account: "acct"})
	if resp.StatusCode != http.StatusConflict || errorCode(t, b) != "conflict" || !strings.Contains(string(b), "fenced") {
		t.Fatalf("fenced stop: got %d %s, want 409 conflict saying fenced", resp.StatusCode, b)
	}
	hr, err := c.Get(r.url + noderpc.PathHealth)
	if err != nil {
		t.Fatal(err)
	}
	var h noderpc.Health
	json.NewDecoder(hr.Body).Decode(&h)
	hr.Body.Close()
	if h != (noderpc.Health{Node: testNode, Epoch: 7, Fenced: true}) {
		t.Fatalf("health: got %+v, want the node fenced", h)
	}
	if got := r.mgr.Calls(); len(got) != 1 {
		t.Fatalf("got calls %q, want only the first stop", got)
	}
}

func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	var e api.ErrorBody
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an error body: %s", b)
	}
	return e.Error.Code
}

// echoAgent answers every request with its own body, as it comes.
type echoAgent struct{ got chan *http.Request }

func (e echoAgent) RoundTrip(r *http.Request) (*http.Response, error) {
	e.got <- r
	pr, pw := io.Pipe()
	go func() {
		buf := make([]byte, 512)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				if _, werr := pw.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}}, Body: pr, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// An agent request reaches the manager's round tripper as
// http://sandbox-agent/PATH?QUERY without the caller's credentials, and
// streams both ways: the answer's first line comes back before the
// request's body has ended.
func TestRPCAgentStreams(t *testing.T) {
	r := newRig(t)
	agent := echoAgent{got: make(chan *http.Request, 1)}
	r.mgr.agent = agent
	c := r.apiClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/node/v1/sandboxes/sb1/agent/files/a%2Fb/c?user=root&x=a%20b", pr)
	req.Header.Set(noderpc.HeaderAccount, "acct")
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("X-Request-Id", "req-1")
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		done <- resp
	}()
	if _, err := pw.Write([]byte("first\n")); err != nil {
		t.Fatal(err)
	}
	var out *http.Request
	select {
	case out = <-agent.got:
	case <-ctx.Done():
		t.Fatal("the agent got no request")
	}
	if got, want := out.URL.String(), "http://sandbox-agent/files/a%2Fb/c?user=root&x=a%20b"; got != want {
		t.Errorf("got URL %s, want %s", got, want)
	}
	for _, h := range []string{"Authorization", noderpc.HeaderAccount} {
		if v := out.Header.Get(h); v != "" {
			t.Errorf("got %s %q at the agent, want none", h, v)
		}
	}
	if out.Header.Get("X-Request-Id") != "req-1" {
		t.Errorf("got X-Request-Id %q, want req-1 passed on", out.Header.Get("X-Request-Id"))
	}
	resp := <-done
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("got %q %v, want the first line echoed while the body is open", line, err)
	}
	pw.Write([]byte("second\n"))
	pw.Close()
	rest, _ := io.ReadAll(br)
	if string(rest) != "second\n" {
		t.Fatalf("got %q, want the second line", rest)
	}
	if got := r.mgr.Calls(); !slices.Equal(got, []string{"agent acct sb1"}) {
		t.Fatalf("got calls %q, want one agent call for the header's account", got)
	}
}

// The agent path's own refusals are marked as the node's.
func TestRPCAgentRefused(t *testing.T) {
	r := newRig(t)
	r.mgr.err = errNotFound
	req, _ := http.NewRequest(http.MethodGet, r.url+"/node/v1/sandboxes/sb1/agent/files/list", nil)
	resp, err := r.apiClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get(HeaderNodeError) == "" || errorCode(t, b) != "not_found" {
		t.Fatalf("got %d %v %s, want 404 not_found marked as the node's", resp.StatusCode, resp.Header, b)
	}
}
