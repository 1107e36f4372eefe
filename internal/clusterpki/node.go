package clusterpki

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/store"
)

// Polling of a node's entry for its certificate: quickly while it has
// none, then now and then for a renewal.
const (
	waitPoll  = 500 * time.Millisecond
	renewPoll = time.Minute
	// helloFetchEvery bounds the store reads a handshake makes while the
	// node has no certificate.
	helloFetchEvery = 200 * time.Millisecond
)

// Source is where a node reads its registry entry.
type Source interface {
	GetNode(ctx context.Context, id string) (*store.Node, error)
}

// NodeKey is a node's side of the installation's PKI: its own key (made
// in its process and never written anywhere), its certificate request,
// the certificate an API server issued for it, and the authority's
// certificate it checks callers against. It holds no key of the
// authority and can certify nothing.
type NodeKey struct {
	id  string
	key *ecdsa.PrivateKey
	csr string
	pin string // file of the authority's certificate ("": memory only)

	mu      sync.Mutex
	ca      *x509.Certificate
	roots   *x509.CertPool
	cert    *tls.Certificate
	chain   string // the PEM cert was made from
	fetched time.Time
}

// NewNodeKey makes node id's key and certificate request. pinFile keeps
// the authority's certificate the node first accepts (DATA/authority.crt):
// once it is there, only certificates of that authority are accepted,
// whatever the store says later.
func NewNodeKey(id, pinFile string) (*NodeKey, error) {
	if err := checkNodeID(id); err != nil {
		return nil, err
	}
	k := &NodeKey{id: id, pin: pinFile}
	if pinFile != "" {
		b, err := os.ReadFile(pinFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("reading the installation's authority: %w", err)
		default:
			chain, err := parseChain(string(b))
			if err != nil || len(chain) != 1 || !chain[0].IsCA {
				return nil, fmt.Errorf("%s is not the installation's authority's certificate", pinFile)
			}
			k.setCA(chain[0])
		}
	}
	var err error
	if k.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	u, _ := url.Parse(NodeURI(id))
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: NodeURI(id)},
		URIs:    []*url.URL{u},
	}, k.key)
	if err != nil {
		return nil, err
	}
	k.csr = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	return k, nil
}

func (k *NodeKey) setCA(ca *x509.Certificate) {
	k.ca = ca
	k.roots = x509.NewCertPool()
	k.roots.AddCert(ca)
}

// CSR is the node's certificate request (PEM), for its registry entry.
func (k *NodeKey) CSR() string { return k.csr }

// Accept takes chainPEM (the node's certificate, then the authority's) as
// the node's certificate if it certifies this key as this node, for
// servers only, by the pinned authority (the first one accepted is
// pinned).
func (k *NodeKey) Accept(chainPEM string) error {
	chain, err := parseChain(chainPEM)
	if err != nil {
		return fmt.Errorf("node certificate: %w", err)
	}
	if len(chain) != 2 {
		return fmt.Errorf("node certificate: a chain of %d certificates, want the node's and the authority's", len(chain))
	}
	leaf, ca := chain[0], chain[1]
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ca != nil && !ca.Equal(k.ca) {
		return errors.New("node certificate: of another authority than the installation's")
	}
	if !ca.IsCA || ca.CheckSignatureFrom(ca) != nil {
		return errors.New("node certificate: its authority is not a certificate authority")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if err := verify(roots, chain[:1], NodeURI(k.id), x509.ExtKeyUsageServerAuth); err != nil {
		return fmt.Errorf("node certificate: %w", err)
	}
	if slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return errors.New("node certificate: made for clients too")
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&k.key.PublicKey) {
		return errors.New("node certificate: not for this node's key")
	}
	if k.ca == nil {
		if err := k.writePin(ca); err != nil {
			return err
		}
		k.setCA(ca)
	}
	k.cert = &tls.Certificate{Certificate: [][]byte{leaf.Raw, ca.Raw}, PrivateKey: k.key, Leaf: leaf}
	k.chain = chainPEM
	return nil
}

// writePin keeps the authority's certificate in the pin file.
func (k *NodeKey) writePin(ca *x509.Certificate) error {
	if k.pin == "" {
		return nil
	}
	tmp := k.pin + ".tmp"
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("keeping the installation's authority: %w", err)
	}
	if err := os.Rename(tmp, k.pin); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("keeping the installation's authority: %w", err)
	}
	if d, err := os.Open(filepath.Dir(k.pin)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Certificate is the node's current certificate (nil before the first).
func (k *NodeKey) Certificate() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cert
}

// Refresh reads the node's entry from src and accepts a certificate
// there that is new and for this node's request.
func (k *NodeKey) Refresh(ctx context.Context, src Source) error {
	n, err := src.GetNode(ctx, k.id)
	if err != nil {
		return err
	}
	k.mu.Lock()
	same := n.CSR != k.csr || n.Cert == "" || n.Cert == k.chain
	k.mu.Unlock()
	if same {
		return nil
	}
	return k.Accept(n.Cert)
}

// Run refreshes from src until ctx ends: every waitPoll until the node
// has a certificate, then every renewPoll (API servers issue a new one at
// half its life).
func (k *NodeKey) Run(ctx context.Context, src Source, onErr func(error)) {
	for {
		err := k.Refresh(ctx, src)
		if err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		every := renewPoll
		if k.Certificate() == nil {
			every = waitPoll
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// ServerTLS is the configuration of the node's listener: its own
// certificate, and only callers with the authority's API certificate.
// Until it has a certificate every handshake fails; with src, a handshake
// then reads the entry first (at most every helloFetchEvery), so that a
// certificate an API server has just issued serves that API server's
// first call.
func (k *NodeKey) ServerTLS(src Source) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			ctx := context.Background()
			if hello != nil {
				ctx = hello.Context()
			}
			return k.current(ctx, src)
		},
		ClientAuth: tls.RequireAnyClientCert,
		// Chain and identity are checked here rather than by ClientCAs,
		// so that a certificate of this authority for anything but an API
		// server (a node's own, say) is refused too.
		VerifyConnection: func(cs tls.ConnectionState) error {
			k.mu.Lock()
			roots := k.roots
			k.mu.Unlock()
			if roots == nil {
				return errors.New("no certificate of the installation yet")
			}
			return verify(roots, cs.PeerCertificates, apiURI, x509.ExtKeyUsageClientAuth)
		},
	}
}

func (k *NodeKey) current(ctx context.Context, src Source) (*tls.Certificate, error) {
	if c := k.Certificate(); c != nil {
		return c, nil
	}
	if src != nil {
		k.mu.Lock()
		due := time.Since(k.fetched) >= helloFetchEvery
		if due {
			k.fetched = time.Now()
		}
		k.mu.Unlock()
		if due {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			k.Refresh(ctx, src)
			cancel()
		}
		if c := k.Certificate(); c != nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("node %s has no certificate yet: no API server has issued one", k.id)
}
