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

// valueName is the store's name for the authority: its certificate and
// its key sealed (PEM). The name of releases that kept the key in the
// clear, "cluster-ca", is never read.
const valueName = "cluster-authority"

// sealedKeyType is the PEM type of the sealed key.
const sealedKeyType = "WITHRUNTIME SEALED AUTHORITY KEY"

// Lifetimes. Leaves are made again at half their life, so a process that
// runs for years keeps valid certificates.
const (
	caLifetime   = 20 * 365 * 24 * time.Hour
	leafLifetime = 30 * 24 * time.Hour
	// backdate covers hosts whose clocks run a little behind.
	backdate = time.Hour
)

// Authority is the installation's certificate authority: what API servers
// hold, and nodes never.
type Authority struct {
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
	roots *x509.CertPool
	// leafLife is the life of the certificates it issues (leafLifetime;
	// shorter in tests of renewal).
	leafLife time.Duration
	api      *leafCert // this process's API certificate
}

// Open returns the installation's authority, whose key is sealed in the
// store with sealKey, making it when the store has none yet (of API
// servers starting together, the first write wins and every one uses
// it). An authority sealed with another key is ErrWrongSealKey.
func Open(ctx context.Context, st store.Values, sealKey []byte) (*Authority, error) {
	made, err := newAuthorityPEM(sealKey)
	if err != nil {
		return nil, err
	}
	stored, err := st.InitValue(ctx, valueName, made)
	if err != nil {
		return nil, fmt.Errorf("reading the installation's authority: %w", err)
	}
	return parse(stored, sealKey)
}

// New makes an authority that is kept nowhere (tests, and a second
// installation to be refused by the first).
func New() (*Authority, error) {
	k := NewSealKey()
	p, err := newAuthorityPEM(k)
	if err != nil {
		return nil, err
	}
	return parse(p, k)
}

func newAuthorityPEM(sealKey []byte) ([]byte, error) {
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
	sealed, err := seal(sealKey, keyDER, der)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: sealedKeyType, Bytes: sealed})...), nil
}

func parse(p []byte, sealKey []byte) (*Authority, error) {
	var sealed []byte
	a := Authority{leafLife: leafLifetime}
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
		case sealedKeyType:
			sealed = b.Bytes
		}
		if err != nil {
			return nil, fmt.Errorf("the installation's authority is damaged: %w", err)
		}
	}
	if a.cert == nil || sealed == nil || !a.cert.IsCA {
		return nil, errors.New("the installation's authority is damaged: no certificate and sealed key")
	}
	keyDER, err := unseal(sealKey, sealed, a.cert.Raw)
	if err != nil {
		return nil, err
	}
	if a.key, err = x509.ParseECPrivateKey(keyDER); err != nil {
		return nil, fmt.Errorf("the installation's authority is damaged: %w", err)
	}
	if !a.key.PublicKey.Equal(a.cert.PublicKey) {
		return nil, errors.New("the installation's authority is damaged: its key is not its certificate's")
	}
	a.roots = x509.NewCertPool()
	a.roots.AddCert(a.cert)
	a.api = a.leaf(apiURI, x509.ExtKeyUsageClientAuth)
	return &a, nil
}

// Certificate is the authority's certificate (public).
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
