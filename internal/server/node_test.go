package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/testenv"
)

// nodeDatabase makes a database of its own on WITHRUNTIME_TEST_POSTGRES,
// dropped when the test ends, and returns its URL.
func nodeDatabase(t *testing.T) string {
	t.Helper()
	return testenv.FreshPostgres(t, "wr_node_")
}

// A node daemon on a real store and gVisor: it registers itself, and an
// API server's certificate creates a sandbox through its RPC and runs a
// command in it through the agent path.
func TestNodeLive(t *testing.T) {
	testenv.RequiresGvisor(t)
	db := nodeDatabase(t)
	ctx := context.Background()
	dataDir := t.TempDir()
	cfg := NodeConfig{
		Config: Config{
			Listen: "127.0.0.1:0", DataDir: dataDir, CacheDir: testenv.CacheDir(), NoEgress: true,
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
			Manager: manager.Config{ReapInterval: 200 * time.Millisecond, DiskMiB: 256},
		},
		Store: db, LeaseTTL: 10 * time.Second,
	}
	t.Setenv("PGPASSWORD", "not-the-store's") // the URL's password wins
	n, err := StartNode(ctx, cfg)
	if err != nil {
		t.Fatalf("StartNode: %v", err)
	}
	defer func() { n.Close() }()
	if v, ok := os.LookupEnv("PGPASSWORD"); ok {
		t.Fatalf("got PGPASSWORD=%q in the node's environment, which runsc inherits; want it unset", v)
	}
	// A second daemon on the data dir is refused at once.
	if _, err := StartNode(ctx, cfg); err == nil || !strings.Contains(err.Error(), "another withruntime node runs on data dir") {
		t.Fatalf("a second node on the data dir: got %v, want it refused", err)
	}
	idFile, err := os.ReadFile(filepath.Join(dataDir, "node.id"))
	if err != nil || strings.TrimSpace(string(idFile)) != n.ID {
		t.Fatalf("got node.id %q %v, want %s", idFile, err, n.ID)
	}

	// The API server's side: the same store, the same authority.
	st, err := store.Open(ctx, db, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	entry, err := st.GetNode(ctx, n.ID)
	if err != nil {
		t.Fatalf("the node is not registered: %v", err)
	}
	if entry.Addr != n.Addr || entry.CPUs == 0 || entry.MemoryMiB == 0 || !strings.HasPrefix(entry.Compat, "sha256:") || entry.Epoch != 1 ||
		len(entry.Isolations) == 0 || entry.Isolations[0] != "gvisor" {
		t.Fatalf("got entry %+v, want the node's address, capacity, compat, isolations (gvisor first) and epoch 1", entry)
	}
	// The node asked for its certificate in its entry; it holds no
	// authority, and its data dir no private key.
	if entry.CSR == "" {
		t.Fatal("the node registered no certificate request")
	}
	filepath.Walk(dataDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Size() < 1<<20 {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("PRIVATE KEY")) || bytes.Contains(b, []byte("SEALED AUTHORITY")) {
				t.Errorf("got a key in the node's %s", p)
			}
		}
		return nil
	})
	auth, err := clusterpki.Open(ctx, st, clusterpki.NewSealKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.IssueNodes(ctx, st); err != nil {
		t.Fatal(err)
	}
	tc, err := auth.ClientTLS(n.ID)
	if err != nil {
		t.Fatal(err)
	}
	c := noderpc.NewClient(n.ID, n.Addr, tc)
	defer c.Close()
	rec, err := c.Create(ctx, noderpc.CreateRequest{Account: "acct1", KeyID: "key1"})
	if err != nil {
		t.Fatalf("create through the RPC: %v", err)
	}
	defer func() { c.Op(context.Background(), rec.ID, noderpc.OpStop, noderpc.OpRequest{Account: "acct1"}) }()
	if rec.Node != n.ID || rec.NodeEpoch != entry.Epoch {
		t.Fatalf("got record node %q epoch %d, want %s epoch %d", rec.Node, rec.NodeEpoch, n.ID, entry.Epoch)
	}

	execHi(t, c, rec.ID)

	// Another account does not reach the sandbox.
	if _, err := c.Op(ctx, rec.ID, noderpc.OpExtend, noderpc.OpRequest{Account: "acct2", TimeoutMs: 60000}); err == nil {
		t.Fatal("another account extended the sandbox")
	}
	stopped, err := c.Op(ctx, rec.ID, noderpc.OpStop, noderpc.OpRequest{Account: "acct1"})
	if err != nil || stopped.State != sandbox.StateEnded || stopped.EndReason != sandbox.EndStopped {
		t.Fatalf("stop: got %+v %v, want the sandbox stopped", stopped, err)
	}

	// A node closed and started again on its data dir is the same node,
	// a new epoch. (Re-adopting running sandboxes takes a new process:
	// test/cluster restarts node daemons.)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	n2, err := StartNode(ctx, cfg)
	if err != nil {
		t.Fatalf("StartNode again: %v", err)
	}
	n = n2
	if n2.ID != entry.ID {
		t.Fatalf("got id %s after a restart, want %s", n2.ID, entry.ID)
	}
	if e, err := st.GetNode(ctx, n2.ID); err != nil || e.Epoch != 2 || e.Addr != n2.Addr {
		t.Fatalf("got entry %+v %v, want epoch 2 at %s", e, err, n2.Addr)
	}
	if err := auth.IssueNodes(ctx, st); err != nil { // the new process's key
		t.Fatal(err)
	}
	c = noderpc.NewClient(n2.ID, n2.Addr, tc)
	defer c.Close()
	if h, err := c.Health(ctx); err != nil || h.Node != n2.ID || h.Epoch != 2 || h.Fenced {
		t.Fatalf("health after a restart: got %+v %v, want node %s epoch 2 serving", h, err, n2.ID)
	}
}

// execHi runs echo hi in sandbox id through c's agent path.
func execHi(t *testing.T, c *noderpc.Client, id string) {
	t.Helper()
	body, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Shell: "echo hi"}})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://sandbox-agent/exec", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: c.AgentTransport("acct1", id), Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("exec through the RPC: %v", err)
	}
	defer resp.Body.Close()
	var out strings.Builder
	exit := -1
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("exec event %q: %v", sc.Bytes(), err)
		}
		if ev.Type == "stdout" {
			out.WriteString(ev.Data)
		}
		if ev.ExitCode != nil {
			exit = *ev.ExitCode
		}
	}
	if resp.StatusCode != http.StatusOK || out.String() != "hi\n" || exit != 0 {
		t.Fatalf("got status %d stdout %q exit %d, want 200, \"hi\\n\" and 0", resp.StatusCode, out.String(), exit)
	}

}
