package cluster_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/node"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// managerStub stands in for a node's manager behind the real node RPC
// server (internal/node): records in the shared store, an agent that
// streams.
type managerStub struct {
	id string
	st store.Store

	mu    sync.Mutex
	calls []string
}

func (m *managerStub) log(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, s)
}

func (m *managerStub) Create(ctx context.Context, account, keyID string, req service.CreateRequest) (*sandbox.Record, error) {
	m.log("create " + account + " " + keyID + " " + req.Image)
	now := time.Now().UTC()
	r := &sandbox.Record{ID: "sb-" + m.id, Account: account, KeyID: keyID, Node: m.id, State: sandbox.StateRunning, CreatedAt: now, LeaseEndsAt: now.Add(time.Hour)}
	return r, m.st.PutSandbox(ctx, r)
}

func (m *managerStub) refuse(op, id string) (*sandbox.Record, error) {
	m.log(op + " " + id)
	return nil, sandbox.Errorf(sandbox.KindConflict, "cannot %s sandbox %s while it is paused", op, id)
}

func (m *managerStub) Extend(ctx context.Context, account, id string, d time.Duration) (*sandbox.Record, error) {
	m.log("extend " + id + " " + d.String())
	return m.st.GetSandbox(ctx, id)
}
func (m *managerStub) SetLease(ctx context.Context, account, id string, d time.Duration) (*sandbox.Record, error) {
	return m.refuse("set_lease", id)
}
func (m *managerStub) Stop(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return m.refuse("stop", id)
}
func (m *managerStub) Pause(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return m.refuse("pause", id)
}
func (m *managerStub) Resume(ctx context.Context, account, id string) (*sandbox.Record, error) {
	return m.refuse("resume", id)
}
func (m *managerStub) SetNetwork(ctx context.Context, account, id string, n sandbox.Network) (*sandbox.Record, error) {
	return m.refuse("set_network", id)
}
func (m *managerStub) Egress(ctx context.Context, account, id string) ([]egress.Event, error) {
	m.log("egress " + account + " " + id)
	return []egress.Event{{Kind: "connect", Name: "example.org", Verdict: "allowed"}}, nil
}

// Agent answers every request with an NDJSON stream that echoes each
// line of the request's body as it comes.
func (m *managerStub) Agent(ctx context.Context, account, id string) (http.RoundTripper, error) {
	m.log("agent " + account + " " + id)
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		m.log("agent request " + r.URL.String() + " auth=" + r.Header.Get("Authorization"))
		pr, pw := io.Pipe()
		go func() {
			sc := bufio.NewScanner(r.Body)
			for sc.Scan() {
				io.WriteString(pw, `{"type":"stdout","data":"`+sc.Text()+`"}`+"\n")
			}
			io.WriteString(pw, `{"type":"exit","exit_code":0}`+"\n")
			pw.Close()
		}()
		h := http.Header{"Content-Type": {"application/x-ndjson"}}
		return &http.Response{StatusCode: 200, Header: h, Body: pr, Request: r, ContentLength: -1}, nil
	}), nil
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type nodeState struct{ fenced atomic.Bool }

func (*nodeState) Epoch() int64   { return 1 }
func (s *nodeState) Fenced() bool { return s.fenced.Load() }

// startRPCNode serves the real node RPC for a stub manager over mutual
// TLS on loopback and registers it.
func startRPCNode(t *testing.T, ca *clusterpki.Authority, st store.Store, id string, load store.NodeLoad) (*managerStub, *nodeState) {
	t.Helper()
	m, s := &managerStub{id: id, st: st}, &nodeState{}
	tc, err := ca.ServerTLS(id)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := node.NewServer(node.NewHandler(node.Config{Node: id, Sandboxes: m, State: s}), tc, nil)
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close() })
	e := &store.Node{ID: id, Addr: l.Addr().String(), CPUs: 8, MemoryMiB: 32768, Overcommit: 1}
	if err := st.RegisterNode(t.Context(), e, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RenewNode(t.Context(), id, e.Epoch, load, time.Hour); err != nil {
		t.Fatal(err)
	}
	return m, s
}

func TestThroughNodeRPC(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	fenced, fs := startRPCNode(t, ca, st, "n1", store.NodeLoad{})
	fs.fenced.Store(true)
	m, _ := startRPCNode(t, ca, st, "n2", store.NodeLoad{VCPUs: 4})
	c := newControl(t, st, ca, nil, 0)
	ctx := t.Context()

	// The least loaded node is fenced: it refuses with capacity_exhausted
	// and the create goes to the next.
	rec, err := c.Create(ctx, "acct", "key", service.CreateRequest{Image: "python"})
	if err != nil || rec.Node != "n2" {
		t.Fatalf("create: got %+v, %v; want it on n2", rec, err)
	}
	if len(fenced.calls) != 0 {
		t.Errorf("the fenced node's manager was called: %q", fenced.calls)
	}
	// A node's refusal comes back with its code and message.
	_, err = c.Pause(ctx, "acct", rec.ID)
	if k, msg := sandbox.KindOf(err), sandbox.MessageOf(err); k != sandbox.KindConflict || msg != "cannot pause sandbox sb-n2 while it is paused" {
		t.Errorf("pause: got %s %q, want the node's conflict", k, msg)
	}
	if _, err := c.Extend(ctx, "acct", rec.ID, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	evs, err := c.Egress(ctx, "acct", rec.ID)
	if err != nil || len(evs) != 1 || evs[0].Name != "example.org" {
		t.Errorf("egress: got %+v, %v", evs, err)
	}

	rt, err := c.Agent(ctx, "acct", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://sandbox-agent/processes/7/stdin?x=1", pr)
	req.Header.Set("Authorization", "Bearer wr_secret")
	go io.WriteString(pw, "one\n")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	// The first line's answer comes back before the request's body ends:
	// both bodies stream through the API's client and the node.
	if l, err := lines.ReadString('\n'); err != nil || !strings.Contains(l, `"one"`) {
		t.Fatalf("first line: got %q, %v", l, err)
	}
	go func() { io.WriteString(pw, "two\n"); pw.Close() }()
	rest, err := io.ReadAll(lines)
	if err != nil || !strings.Contains(string(rest), `"two"`) || !strings.Contains(string(rest), `"exit"`) {
		t.Fatalf("rest: got %q, %v", rest, err)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	want := []string{
		"create acct key python",
		"pause sb-n2",
		"extend sb-n2 1m30s",
		"egress acct sb-n2",
		"agent acct sb-n2",
		"agent request http://sandbox-agent/processes/7/stdin?x=1 auth=",
	}
	if strings.Join(m.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("manager calls:\ngot  %q\nwant %q", m.calls, want)
	}
}
