package cluster_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/cluster"
	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// fakeNode is a node daemon reduced to its wire protocol: a real HTTPS
// server (HTTP/2, mutual TLS with the test's authority) on loopback that
// keeps its sandboxes' records in the shared store and records what it
// was asked.
type fakeNode struct {
	id   string
	st   store.Store
	addr string

	mu      sync.Mutex
	creates int
	ops     []string // "op id"
	refuse  sandbox.Kind
	drop    bool
	// release, when set, holds the agent stream's second line until it
	// is closed.
	release chan struct{}
	// lie, when set, changes every record the node answers with (not
	// what it stores).
	lie func(*sandbox.Record)
	// isolations are what it registered; a create of another is refused
	// as a manager refuses it (none: gVisor only).
	isolations []string
}

// answer writes rec as the node's answer, changed by n.lie.
func (n *fakeNode) answer(w http.ResponseWriter, status int, rec *sandbox.Record) {
	n.mu.Lock()
	lie := n.lie
	n.mu.Unlock()
	if lie != nil {
		c := *rec
		lie(&c)
		rec = &c
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(rec)
}

type connKey struct{}

func startNode(t *testing.T, ca *clusterpki.Authority, st store.Store, id string) *fakeNode {
	t.Helper()
	tc, err := ca.ServerTLS(id)
	if err != nil {
		t.Fatal(err)
	}
	return serveNode(t, st, id, tc)
}

// serveNode is startNode with the listener's configuration tc.
func serveNode(t *testing.T, st store.Store, id string, tc *tls.Config) *fakeNode {
	t.Helper()
	n := &fakeNode{id: id, st: st}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+noderpc.PathCreate, n.create)
	mux.HandleFunc("POST "+noderpc.PathOp, n.op)
	mux.HandleFunc("PUT "+noderpc.PathNetwork, n.network)
	mux.HandleFunc(noderpc.PathAgent+"{rest...}", n.agent)
	mux.HandleFunc("DELETE "+noderpc.PathDeleteSnapshot, n.deleteSnapshot)
	srv := &http.Server{Handler: mux, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}}
	go srv.Serve(tls.NewListener(l, tc))
	t.Cleanup(func() { srv.Close() })
	n.addr = l.Addr().String()
	return n
}

func (n *fakeNode) fail(w http.ResponseWriter, k sandbox.Kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(service.Status(k))
	json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: string(k), Message: msg}})
}

func (n *fakeNode) create(w http.ResponseWriter, r *http.Request) {
	var req noderpc.CreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		n.fail(w, sandbox.KindInvalid, err.Error())
		return
	}
	n.mu.Lock()
	n.creates++
	seq, refuse, drop, runs := n.creates, n.refuse, n.drop, n.isolations
	n.mu.Unlock()
	if len(runs) == 0 {
		runs = []string{sandbox.IsolationGVisor}
	}
	iso := cmp.Or(req.Request.Isolation, runs[0])
	switch {
	case !slices.Contains(runs, iso):
		n.fail(w, sandbox.KindNotSupported, "isolation "+iso+" is not available on "+n.id)
		return
	case drop:
		r.Context().Value(connKey{}).(net.Conn).Close()
		return
	case refuse != "":
		n.fail(w, refuse, "refused by "+n.id)
		return
	}
	now := time.Now().UTC()
	rec := &sandbox.Record{
		ID: fmt.Sprintf("%s-sb%d", n.id, seq), Account: req.Account, KeyID: req.KeyID, Node: n.id,
		State: sandbox.StateRunning, CreatedAt: now, StartedAt: &now, LeaseEndsAt: now.Add(time.Hour),
		Spec: sandbox.Spec{VCPUs: req.Request.VCPUs, MemoryMiB: req.Request.MemoryMiB, Isolation: iso},
	}
	if err := n.st.PutSandbox(r.Context(), rec); err != nil {
		n.fail(w, sandbox.KindInternal, err.Error())
		return
	}
	n.answer(w, http.StatusCreated, rec)
}

func (n *fakeNode) op(w http.ResponseWriter, r *http.Request) {
	var req noderpc.OpRequest
	json.NewDecoder(r.Body).Decode(&req)
	id, op := r.PathValue("id"), r.PathValue("op")
	n.mu.Lock()
	n.ops = append(n.ops, op+" "+id)
	refuse := n.refuse
	n.mu.Unlock()
	if refuse != "" {
		n.fail(w, refuse, "refused by "+n.id)
		return
	}
	rec, err := n.st.GetSandbox(r.Context(), id)
	if err != nil || req.Account != "" && rec.Account != req.Account {
		n.fail(w, sandbox.KindNotFound, "sandbox "+id+" not found")
		return
	}
	// A reason as a node takes it: retention_ended on a stop of a paused
	// sandbox whose retention is over, nothing else.
	if req.Reason != "" {
		switch {
		case op != noderpc.OpStop || req.Reason != sandbox.EndRetentionEnded:
			n.fail(w, sandbox.KindInvalid, "no reason "+string(req.Reason)+" for "+op)
			return
		case rec.State != sandbox.StatePaused || rec.RetentionEndsAt == nil || time.Now().Before(*rec.RetentionEndsAt):
			n.fail(w, sandbox.KindConflict, "the retention of "+id+" is not over")
			return
		}
	}
	switch op {
	case noderpc.OpStop:
		now := time.Now().UTC()
		rec.State, rec.EndedAt, rec.EndReason = sandbox.StateEnded, &now, cmp.Or(req.Reason, sandbox.EndStopped)
	case noderpc.OpResume:
		rec.State, rec.Node, rec.PausedAt = sandbox.StateRunning, n.id, nil
	}
	if err := n.st.PutSandbox(r.Context(), rec); err != nil {
		n.fail(w, sandbox.KindConflict, err.Error())
		return
	}
	n.answer(w, http.StatusOK, rec)
}

// deleteSnapshot removes the snapshot's record, as a node does with its
// files.
func (n *fakeNode) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n.mu.Lock()
	n.ops = append(n.ops, "delete_snapshot "+id+" "+r.URL.Query().Get("account"))
	n.mu.Unlock()
	if err := n.st.DeleteSnapshot(r.Context(), id); err != nil {
		n.fail(w, sandbox.KindInternal, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// network answers with the stored record, its policy unchanged.
func (n *fakeNode) network(w http.ResponseWriter, r *http.Request) {
	rec, err := n.st.GetSandbox(r.Context(), r.PathValue("id"))
	if err != nil {
		n.fail(w, sandbox.KindNotFound, "sandbox not found")
		return
	}
	n.answer(w, http.StatusOK, rec)
}

// agent answers like the agent's exec: an NDJSON stream, its first line
// at once and its last once the test releases it.
func (n *fakeNode) agent(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	n.ops = append(n.ops, fmt.Sprintf("agent %s /%s?%s account=%s auth=%q", r.PathValue("id"), r.PathValue("rest"), r.URL.RawQuery, r.Header.Get(noderpc.HeaderAccount), r.Header.Get("Authorization")))
	release := n.release
	n.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Write([]byte(`{"type":"stdout","data":"aGk="}` + "\n"))
	w.(http.Flusher).Flush()
	if release != nil {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	w.Write([]byte(`{"type":"exit","exit_code":0}` + "\n"))
}

func (n *fakeNode) counts() (int, []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.creates, append([]string(nil), n.ops...)
}

// nodeOpts is how a test registers a node.
type nodeOpts struct {
	cpus, memoryMiB int
	diskMiB         int64
	load            store.NodeLoad
	ttl             time.Duration
	lost            bool
	compat          string
	shared          bool
	addr            string // instead of the node's own
	isolations      []string
	csr             string // the node's certificate request (clusterpki.NodeKey)
}

func register(t *testing.T, st store.Store, n *fakeNode, o nodeOpts) {
	t.Helper()
	ctx := t.Context()
	if o.cpus == 0 {
		o.cpus, o.memoryMiB = 8, 32768
	}
	if o.ttl == 0 {
		o.ttl = time.Hour
	}
	addr := n.addr
	if o.addr != "" {
		addr = o.addr
	}
	e := &store.Node{ID: n.id, Addr: addr, CPUs: o.cpus, MemoryMiB: o.memoryMiB, DiskMiB: o.diskMiB, Overcommit: 1, Compat: o.compat, SharedCheckpoints: o.shared, Isolations: o.isolations, CSR: o.csr}
	n.mu.Lock()
	n.isolations = o.isolations
	n.mu.Unlock()
	if err := st.RegisterNode(ctx, e, o.ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RenewNode(ctx, n.id, e.Epoch, o.load, o.ttl); err != nil {
		t.Fatal(err)
	}
	if o.ttl < time.Hour || o.lost {
		waitExpired(t, st, n.id)
	}
	if o.lost {
		if ok, err := st.MarkNodeLost(ctx, n.id, e.Epoch); !ok || err != nil {
			t.Fatalf("marking %s lost: %v, %v", n.id, ok, err)
		}
	}
}

func waitExpired(t *testing.T, st store.Store, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := st.GetNode(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if n.Expired {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not expire", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logBuffer collects the log lines of every control in a test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Count(l.b.Bytes(), []byte(`"msg":"`+msg+`"`))
}

func newControl(t *testing.T, st store.Store, ca *clusterpki.Authority, logs *logBuffer, detect time.Duration) *cluster.Control {
	t.Helper()
	lg := slog.New(slog.DiscardHandler)
	if logs != nil {
		lg = slog.New(slog.NewJSONHandler(logs, nil))
	}
	c, err := cluster.New(cluster.Config{Store: st, Authority: ca, Logger: lg, DetectInterval: detect})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func mustAuthority(t *testing.T) *clusterpki.Authority {
	t.Helper()
	ca, err := clusterpki.New()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}
