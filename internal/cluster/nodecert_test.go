package cluster_test

import (
	"testing"

	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// TestFirstCallToANewNode: a node that holds only its own key, registered
// with its request a moment ago, is served by the first create an API
// server sends it: the control plane issues the certificate before it
// dials (no issuer run to wait for), and the node's handshake reads it.
func TestFirstCallToANewNode(t *testing.T) {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	k, err := clusterpki.NewNodeKey("fresh", "")
	if err != nil {
		t.Fatal(err)
	}
	n := serveNode(t, st, "fresh", k.ServerTLS(st))
	register(t, st, n, nodeOpts{csr: k.CSR()})
	c := newControl(t, st, ca, nil, 0)
	rec, err := c.Create(t.Context(), "acct", "key", service.CreateRequest{})
	if err != nil {
		t.Fatalf("first create on a new node: %v", err)
	}
	if rec.Node != "fresh" || k.Certificate() == nil {
		t.Fatalf("got node %q, certificate %v; want fresh, holding its issued certificate", rec.Node, k.Certificate() != nil)
	}
	if e, _ := st.GetNode(t.Context(), "fresh"); e.Cert == "" {
		t.Fatal("the certificate is not in the node's entry")
	}
}
