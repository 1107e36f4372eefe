package clusterpki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/store/storetest"
)

// serve runs an HTTPS server with cfg on loopback that answers "ok".
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          nil,
	}
	go srv.Serve(tls.NewListener(l, cfg))
	t.Cleanup(func() { srv.Close() })
	return "https://" + l.Addr().String()
}

// get asks url with cfg and returns the body, or the error.
func get(url string, cfg *tls.Config) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func mustNew(t *testing.T) *Authority {
	t.Helper()
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAPIReachesItsNode(t *testing.T) {
	a := mustNew(t)
	srvCfg, err := a.ServerTLS("node1")
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, srvCfg)
	cliCfg, err := a.ClientTLS("node1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := get(url, cliCfg); err != nil || got != "ok" {
		t.Fatalf("got %q, %v; want ok", got, err)
	}
}

// TestRefused: the node answers nobody but this installation's API
// servers, and an API server talks to no one but the node it meant.
func TestRefused(t *testing.T) {
	a, other := mustNew(t), mustNew(t)
	srvCfg, _ := a.ServerTLS("node1")
	url := serve(t, srvCfg)

	otherAPI, _ := other.ClientTLS("node1")
	wrongNode, _ := a.ClientTLS("node2")
	nodeAsAPI := &tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			// This authority's certificate, for usage as a client, but
			// naming a node: a node posing as an API server.
			return a.issue(NodeURI("node3"), x509.ExtKeyUsageClientAuth, time.Now())
		},
	}
	nodeCert := &tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			// A node's own server certificate offered as a client's.
			return a.issue(NodeURI("node3"), x509.ExtKeyUsageServerAuth, time.Now())
		},
	}
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"no client certificate", noCert},
		{"another installation's API", otherAPI},
		{"a node's identity as client", nodeAsAPI},
		{"a node's server certificate as client", nodeCert},
		{"the API expecting another node", wrongNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := get(url, tc.cfg); err == nil {
				t.Fatalf("got %q, want the handshake refused", got)
			}
		})
	}

	// An impostor node of another installation is refused by the API.
	impostor, _ := other.ServerTLS("node1")
	url2 := serve(t, impostor)
	cli, _ := a.ClientTLS("node1")
	if got, err := get(url2, cli); err == nil || !strings.Contains(err.Error(), "not of this installation") {
		t.Fatalf("got %q, %v; want the impostor refused", got, err)
	}
}

// TestOpenOnce: API servers sharing a store and its seal key share one
// authority.
func TestOpenOnce(t *testing.T) {
	st := storetest.OpenBolt(t)
	ctx := context.Background()
	k := NewSealKey()
	a1, err := Open(ctx, st, k)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := Open(ctx, st, k)
	if err != nil {
		t.Fatal(err)
	}
	if !a1.cert.Equal(a2.cert) {
		t.Fatal("two opens of one store made two authorities")
	}
	srvCfg, _ := a1.ServerTLS("n")
	cliCfg, _ := a2.ClientTLS("n")
	if got, err := get(serve(t, srvCfg), cliCfg); err != nil || got != "ok" {
		t.Fatalf("got %q, %v; want ok across the two opens", got, err)
	}
}

func TestDamaged(t *testing.T) {
	st := storetest.OpenBolt(t)
	if _, err := st.InitValue(context.Background(), valueName, []byte("not pem")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), st, NewSealKey()); err == nil {
		t.Fatal("a damaged authority was accepted")
	}
}
