package clusterpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sync"
	"time"
)

// Identities, as URI names in certificates. Roles are told apart by the
// name and by the usage: an API server's certificate is for clients
// only, a node's for servers only, and each names exactly one identity.
const (
	apiURI        = "withruntime://api"
	nodeURIPrefix = "withruntime://node/"
)

// NodeURI is the identity of node id.
func NodeURI(id string) string { return nodeURIPrefix + id }

// nodeIDPattern is what a node id may be in a certificate: one path
// segment of plain characters.
var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkNodeID(id string) error {
	if !nodeIDPattern.MatchString(id) {
		return fmt.Errorf("clusterpki: %q is not a node id", id)
	}
	return nil
}

// ServerTLS is a listener configuration for node nodeID with a key made
// here and certified at once by this authority: what a node gets through
// the store, without the store (tests). A node daemon never holds an
// authority; it uses NodeKey.
func (a *Authority) ServerTLS(nodeID string) (*tls.Config, error) {
	k, err := NewNodeKey(nodeID, "")
	if err != nil {
		return nil, err
	}
	chain, err := a.sign(nodeID, k.CSR(), time.Now())
	if err != nil {
		return nil, err
	}
	if err := k.Accept(chain); err != nil {
		return nil, err
	}
	return k.ServerTLS(nil), nil
}

// ClientTLS is the configuration of an API server's connections to node
// nodeID: the API's certificate, and only that node's certificate of the
// authority is accepted.
func (a *Authority) ClientTLS(nodeID string) (*tls.Config, error) {
	if err := checkNodeID(nodeID); err != nil {
		return nil, err
	}
	if _, err := a.api.get(); err != nil {
		return nil, err
	}
	want := NodeURI(nodeID)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2", "http/1.1"},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return a.api.get()
		},
		// Names and addresses do not say who a node is (it may sit behind
		// any address); its identity in the authority's certificate does.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verify(a.roots, cs.PeerCertificates, want, x509.ExtKeyUsageServerAuth)
		},
	}, nil
}

// verify checks that chain leads to roots and that its leaf, made for
// usage, names want and nothing else.
func verify(roots *x509.CertPool, chain []*x509.Certificate, want string, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return fmt.Errorf("certificate not of this installation: %w", err)
	}
	if u := chain[0].URIs; len(u) != 1 || u[0].String() != want {
		return fmt.Errorf("certificate is not %s", want)
	}
	return nil
}

// leafCert is a certificate made on demand and made again at half its
// life.
type leafCert struct {
	a     *Authority
	uri   string
	usage x509.ExtKeyUsage

	mu    sync.Mutex
	cert  *tls.Certificate
	renew time.Time
}

func (a *Authority) leaf(uri string, usage x509.ExtKeyUsage) *leafCert {
	return &leafCert{a: a, uri: uri, usage: usage}
}

func (l *leafCert) get() (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.cert != nil && now.Before(l.renew) {
		return l.cert, nil
	}
	c, err := l.a.issue(l.uri, l.usage, now)
	if err != nil {
		return nil, err
	}
	l.cert, l.renew = c, now.Add(l.a.leafLife/2)
	return c, nil
}

// issue makes a fresh key and a certificate of the authority naming uri.
func (a *Authority) issue(uri string, usage x509.ExtKeyUsage, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := a.certify(&key.PublicKey, uri, usage, now)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// certify is the authority's certificate of pub naming uri, for usage
// only.
func (a *Authority) certify(pub crypto.PublicKey, uri string, usage x509.ExtKeyUsage, now time.Time) ([]byte, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: uri},
		URIs:         []*url.URL{u},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(a.leafLife),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key)
	if err != nil {
		return nil, fmt.Errorf("issuing a certificate for %s: %w", uri, err)
	}
	return der, nil
}
