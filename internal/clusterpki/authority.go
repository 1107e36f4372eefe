package clusterpki

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/withruntime/withruntime/internal/store"
)

// valueName is the store's name for the authority (certificate and key,
// PEM).
const valueName = "cluster-ca"

// Lifetimes. Leaves are made again at half their life (leaf.go), so a
// process that runs for years keeps valid certificates.
const (
	caLifetime   = 20 * 365 * 24 * time.Hour
	leafLifetime = 30 * 24 * time.Hour
	// backdate covers hosts whose clocks run a little behind.
	backdate = time.Hour
)

// Authority is the installation's certificate authority.
type Authority struct {
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
	roots *x509.CertPool
}

// Open returns the installation's authority, making it when the store has
// none yet (of processes starting together, the first write wins and every
// one uses it).
func Open(ctx context.Context, st store.Store) (*Authority, error) {
	made, err := newAuthorityPEM()
	if err != nil {
		return nil, err
	}
	stored, err := st.InitValue(ctx, valueName, made)
	if err != nil {
		return nil, fmt.Errorf("reading the installation's authority: %w", err)
	}
	return parse(stored)
}

// New makes an authority that is kept nowhere (tests, and a second
// installation to be refused by the first).
func New() (*Authority, error) {
	p, err := newAuthorityPEM()
	if err != nil {
		return nil, err
	}
	return parse(p)
}

func newAuthorityPEM() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "withruntime installation authority"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...), nil
}

func parse(p []byte) (*Authority, error) {
	var a Authority
	for {
		var b *pem.Block
		b, p = pem.Decode(p)
		if b == nil {
			break
		}
		var err error
		switch b.Type {
		case "CERTIFICATE":
			a.cert, err = x509.ParseCertificate(b.Bytes)
		case "EC PRIVATE KEY":
			a.key, err = x509.ParseECPrivateKey(b.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("the installation's authority is damaged: %w", err)
		}
	}
	if a.cert == nil || a.key == nil || !a.cert.IsCA {
		return nil, errors.New("the installation's authority is damaged: no certificate and key")
	}
	a.roots = x509.NewCertPool()
	a.roots.AddCert(a.cert)
	return &a, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
