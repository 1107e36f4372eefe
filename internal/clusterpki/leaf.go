package clusterpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"
)

// Identities, as URI names in certificates.
const (
	apiURI        = "withruntime://api"
	nodeURIPrefix = "withruntime://node/"
)

// NodeURI is the identity of node id.
func NodeURI(id string) string { return nodeURIPrefix + id }

// ServerTLS is the configuration of node nodeID's listener: its own
// certificate, and only callers with the authority's API certificate.
func (a *Authority) ServerTLS(nodeID string) (*tls.Config, error) {
	if nodeID == "" {
		return nil, errors.New("clusterpki: a node needs an id")
	}
	leaf := a.leaf(NodeURI(nodeID), x509.ExtKeyUsageServerAuth)
	if _, err := leaf.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return leaf.get() },
		ClientAuth:     tls.RequireAnyClientCert,
		// Chain and identity are checked here rather than by ClientCAs,
		// so that a certificate of this authority for anything but an API
		// server (a node's, say) is refused too.
		VerifyConnection: func(cs tls.ConnectionState) error {
			return a.verify(cs.PeerCertificates, apiURI, x509.ExtKeyUsageClientAuth)
		},
	}, nil
}

// ClientTLS is the configuration of an API server's connections to node
// nodeID: the API's certificate, and only that node's certificate of the
// authority is accepted.
func (a *Authority) ClientTLS(nodeID string) (*tls.Config, error) {
	if nodeID == "" {
		return nil, errors.New("clusterpki: a node needs an id")
	}
	leaf := a.leaf(apiURI, x509.ExtKeyUsageClientAuth)
	if _, err := leaf.get(); err != nil {
		return nil, err
	}
	want := NodeURI(nodeID)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2", "http/1.1"},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return leaf.get()
		},
		// Names and addresses do not say who a node is (it may sit behind
		// any address); its identity in the authority's certificate does.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return a.verify(cs.PeerCertificates, want, x509.ExtKeyUsageServerAuth)
		},
	}, nil
}

// verify checks that chain leads to the authority and that its leaf, made
// for usage, names want.
func (a *Authority) verify(chain []*x509.Certificate, want string, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: a.roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return fmt.Errorf("certificate not of this installation: %w", err)
	}
	if !slices.ContainsFunc(chain[0].URIs, func(u *url.URL) bool { return u.String() == want }) {
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
	l.cert, l.renew = c, now.Add(leafLifetime/2)
	return c, nil
}

// issue makes a fresh key and a certificate of the authority naming uri.
func (a *Authority) issue(uri string, usage x509.ExtKeyUsage, now time.Time) (*tls.Certificate, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: uri},
		URIs:         []*url.URL{u},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("issuing a certificate for %s: %w", uri, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}
