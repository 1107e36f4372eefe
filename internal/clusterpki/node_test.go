package clusterpki

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// register puts node id in st's registry with k's request, as a node
// daemon does.
func register(t *testing.T, st store.Store, id string, k *NodeKey, ttl time.Duration) *store.Node {
	t.Helper()
	n := &store.Node{ID: id, Addr: "127.0.0.1:1", CSR: k.CSR()}
	if err := st.RegisterNode(context.Background(), n, ttl); err != nil {
		t.Fatal(err)
	}
	return n
}

// nodeOf is a node key of id, registered in st and certified through the
// store by a, as a node daemon gets its certificate.
func nodeOf(t *testing.T, a *Authority, st store.Store, id, pin string) *NodeKey {
	t.Helper()
	k, err := NewNodeKey(id, pin)
	if err != nil {
		t.Fatal(err)
	}
	register(t, st, id, k, time.Hour)
	if err := a.IssueNodes(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if err := k.Refresh(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if k.Certificate() == nil {
		t.Fatalf("node %s got no certificate through the store", id)
	}
	return k
}

// TestStoreHoldsNoAuthorityKey: what a node can read of the store (it has
// the store's credentials) gives it no key of the authority: the row holds
// the key sealed, and opening it without the API servers' seal key fails.
// Before, Open(ctx, st) gave whoever had the store a signing authority.
func TestStoreHoldsNoAuthorityKey(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	sealKey := NewSealKey()
	a, err := Open(ctx, st, sealKey)
	if err != nil {
		t.Fatal(err)
	}
	row, err := st.InitValue(ctx, valueName, []byte("what a node reads"))
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(a.key)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(row, keyDER) || bytes.Contains(row, []byte("PRIVATE KEY-----")) {
		t.Fatalf("got the authority's key in the clear in the store's row:\n%s", row)
	}
	for rest := row; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if _, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
			t.Fatalf("got a private key in the store's %s block", b.Type)
		}
	}
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"another seal key", NewSealKey()},
		{"no seal key", nil},
		{"a short seal key", sealKey[:16]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := Open(ctx, st, tc.key); err == nil {
				t.Fatalf("got an authority (%v) without the seal key, want an error", got.cert.Subject)
			}
		})
	}
	if _, err := Open(ctx, st, NewSealKey()); !errors.Is(err, ErrWrongSealKey) {
		t.Fatalf("got %v, want ErrWrongSealKey", err)
	}
	// A certificate swapped in the row does not open with the old key.
	other, _ := New()
	swapped := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.cert.Raw})
	_, after, _ := bytes.Cut(row, []byte("-----END CERTIFICATE-----\n"))
	if _, err := parse(append(swapped, after...), sealKey); !errors.Is(err, ErrWrongSealKey) {
		t.Fatalf("a swapped certificate: got %v, want ErrWrongSealKey", err)
	}
}

// TestNodeGetsItsLeafThroughTheStore: a node registers a request, an API
// server issues it, the node takes it, and the API server reaches the
// node with it. The node's data dir then holds the authority's
// certificate and no private key at all.
func TestNodeGetsItsLeafThroughTheStore(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	a, err := Open(ctx, st, NewSealKey())
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	pin := filepath.Join(dataDir, "authority.crt")
	k := nodeOf(t, a, st, "node1", pin)
	url := serve(t, k.ServerTLS(st))
	cli, _ := a.ClientTLS("node1")
	if got, err := get(url, cli); err != nil || got != "ok" {
		t.Fatalf("got %q, %v; want the API server served", got, err)
	}
	filepath.Walk(dataDir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Errorf("got a private key in the node's %s", p)
		}
		return nil
	})
	pinned, err := os.ReadFile(pin)
	if err != nil {
		t.Fatal(err)
	}
	if chain, err := parseChain(string(pinned)); err != nil || len(chain) != 1 || !chain[0].Equal(a.cert) {
		t.Fatalf("got pin %q, %v; want the authority's certificate", pinned, err)
	}
	// The next process of the node takes only certificates of the pinned
	// authority, whatever the store holds then.
	other, _ := New()
	k2, err := NewNodeKey("node1", pin)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := other.sign("node1", k2.CSR(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := k2.Accept(chain); err == nil || !strings.Contains(err.Error(), "another authority") {
		t.Fatalf("a chain of another authority: got %v, want it refused", err)
	}
}

// TestNodeLeafIsNoAPIIdentity is the node RPC attacked with a node's own
// certificate and everything else a node holds: its leaf as a client of
// another node (and of itself), a request asking for the API's identity,
// and another node's name. All are refused; the certificate an API server
// issues names the registry entry's node and nothing else.
func TestNodeLeafIsNoAPIIdentity(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	a, err := Open(ctx, st, NewSealKey())
	if err != nil {
		t.Fatal(err)
	}
	evil := nodeOf(t, a, st, "node1", "")
	victim := nodeOf(t, a, st, "node2", "")
	victimURL := serve(t, victim.ServerTLS(st))
	evilURL := serve(t, evil.ServerTLS(st))

	asClient := func(c *tls.Certificate) *tls.Config {
		return &tls.Config{
			MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c, nil },
		}
	}
	// A request signed by the node's own key that asks to be the API and
	// node2, put in the node's own entry (which it may write).
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	apiU, _ := url.Parse(apiURI)
	victimU, _ := url.Parse(NodeURI("node2"))
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: apiURI}, URIs: []*url.URL{apiU, victimU},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	n := &store.Node{ID: "node1", Addr: "127.0.0.1:1", CSR: csr}
	if err := st.RegisterNode(ctx, n, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.IssueNodes(ctx, st); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetNode(ctx, "node1")
	chain, err := parseChain(got.Cert)
	if err != nil || len(chain) == 0 {
		t.Fatalf("got no certificate for the request: %v", err)
	}
	if u := chain[0].URIs; len(u) != 1 || u[0].String() != NodeURI("node1") {
		t.Fatalf("got a certificate naming %v, want only %s", u, NodeURI("node1"))
	}
	if eku := chain[0].ExtKeyUsage; len(eku) != 1 || eku[0] != x509.ExtKeyUsageServerAuth {
		t.Fatalf("got usages %v, want server only", eku)
	}
	asked := &tls.Certificate{Certificate: [][]byte{chain[0].Raw, a.cert.Raw}, PrivateKey: key}

	for _, tc := range []struct {
		name string
		url  string
		cfg  *tls.Config
	}{
		{"its own leaf to another node", victimURL, asClient(evil.Certificate())},
		{"its own leaf to itself", evilURL, asClient(evil.Certificate())},
		{"the leaf of a request naming the API", victimURL, asClient(asked)},
		{"another node's leaf (had it leaked)", evilURL, asClient(victim.Certificate())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := get(tc.url, tc.cfg); err == nil {
				t.Fatalf("got %q, want the handshake refused", got)
			}
		})
	}
	// Nor does a node's leaf pass as another node's to an API server.
	cli, _ := a.ClientTLS("node2")
	if got, err := get(evilURL, cli); err == nil || !strings.Contains(err.Error(), "is not "+NodeURI("node2")) {
		t.Fatalf("node1 serving as node2: got %q, %v; want it refused", got, err)
	}
	// And the store gives the node nothing that signs.
	if _, err := Open(ctx, st, nil); err == nil {
		t.Fatal("opened the authority without the seal key")
	}
}

// TestIssueOnlyRegistered: an API server issues only for live entries of
// the registry, only well-formed requests signed by their key, and never
// twice for a certificate that has life left.
func TestIssueOnlyRegistered(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	a, _ := New()
	k, _ := NewNodeKey("node1", "")

	// Not registered: nothing to write to.
	if ok, err := a.IssueNode(ctx, st, store.Node{ID: "node1", Epoch: 1, CSR: k.CSR()}); ok || err != nil {
		t.Fatalf("an unregistered node: got %v, %v; want nothing issued", ok, err)
	}
	if n, err := st.ListNodes(ctx); err != nil || len(n) != 0 {
		t.Fatalf("got entries %v, %v; want none", n, err)
	}

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var forged string
	{ // a request whose signature is not its key's
		b, _ := pem.Decode([]byte(k.CSR()))
		req, _ := x509.ParseCertificateRequest(b.Bytes)
		der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: req.Subject}, other)
		// Take the other key's request and graft k's public key in.
		r2, _ := x509.ParseCertificateRequest(der)
		forged = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST",
			Bytes: bytes.Replace(r2.Raw, r2.RawSubjectPublicKeyInfo, req.RawSubjectPublicKeyInfo, 1)}))
	}
	for _, tc := range []struct {
		name, id, csr string
	}{
		{"not PEM", "node2", "garbage"},
		{"a certificate, not a request", "node3", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.cert.Raw}))},
		{"a request not signed by its key", "node4", forged},
		{"an id that is no path segment", "../api", k.CSR()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &store.Node{ID: tc.id, Addr: "127.0.0.1:1", CSR: tc.csr}
			if err := st.RegisterNode(ctx, n, time.Hour); err != nil {
				t.Fatal(err)
			}
			if ok, err := a.IssueNode(ctx, st, *n); ok || err == nil {
				t.Fatalf("got %v, %v; want it refused", ok, err)
			}
		})
	}

	// A lost entry gets nothing.
	lost, _ := NewNodeKey("node5", "")
	n := register(t, st, "node5", lost, time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ok, _ := st.MarkNodeLost(ctx, "node5", n.Epoch); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node5 was never lost")
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.IssueNodes(ctx, st)
	if e, _ := st.GetNode(ctx, "node5"); e.Cert != "" {
		t.Fatal("a lost node was issued a certificate")
	}

	// Issued once; not again while it has more than half its life.
	register(t, st, "node1", k, time.Hour)
	e, _ := st.GetNode(ctx, "node1")
	if ok, err := a.IssueNode(ctx, st, *e); !ok || err != nil {
		t.Fatalf("first issue: got %v, %v", ok, err)
	}
	e, _ = st.GetNode(ctx, "node1")
	if ok, err := a.IssueNode(ctx, st, *e); ok || err != nil {
		t.Fatalf("second issue: got %v, %v; want none (the first has its life)", ok, err)
	}
}

// TestRenewal: an API server issues a node's certificate again at half
// its life, for the same key, and the node takes the new one.
func TestRenewal(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	a, _ := New()
	a.leafLife = 2 * time.Second
	k := nodeOf(t, a, st, "node1", "")
	first := k.Certificate().Leaf
	if err := a.IssueNodes(ctx, st); err != nil {
		t.Fatal(err)
	}
	if e, _ := st.GetNode(ctx, "node1"); e.Cert != k.chain {
		t.Fatal("issued again before half its life")
	}
	time.Sleep(1100 * time.Millisecond)
	if err := a.IssueNodes(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := k.Refresh(ctx, st); err != nil {
		t.Fatal(err)
	}
	second := k.Certificate().Leaf
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 || !second.NotAfter.After(first.NotAfter) {
		t.Fatalf("got serial %v until %v, want a new certificate after %v", second.SerialNumber, second.NotAfter, first.NotAfter)
	}
	if !second.PublicKey.(*ecdsa.PublicKey).Equal(&k.key.PublicKey) {
		t.Fatal("the renewal is for another key")
	}
	cli, _ := a.ClientTLS("node1")
	if got, err := get(serve(t, k.ServerTLS(st)), cli); err != nil || got != "ok" {
		t.Fatalf("after the renewal: got %q, %v; want ok", got, err)
	}
}

// TestFirstCallWaitsForNoPoll: the handshake of an API server's first
// call, right after it issued the node's certificate, reads the entry
// and is served (no poll interval to wait).
func TestFirstCallWaitsForNoPoll(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	a, _ := New()
	k, _ := NewNodeKey("node1", "")
	url := serve(t, k.ServerTLS(st))
	cli, _ := a.ClientTLS("node1")
	if got, err := get(url, cli); err == nil {
		t.Fatalf("got %q before any certificate, want the handshake refused", got)
	}
	register(t, st, "node1", k, time.Hour)
	if err := a.IssueNodes(ctx, st); err != nil {
		t.Fatal(err)
	}
	time.Sleep(helloFetchEvery)
	if got, err := get(url, cli); err != nil || got != "ok" {
		t.Fatalf("got %q, %v; want ok", got, err)
	}
}
