package egress

import (
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
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca.key"
	caValidity = 10 * 365 * 24 * time.Hour
	// leafValidity is short: a leaf only ever serves the proxy's own
	// connections, and a leaked one is soon worthless.
	leafValidity = 24 * time.Hour
	// leafRenew is how long before its end a cached leaf is replaced.
	leafRenew = time.Hour
)

// CA is the installation's own certificate authority, which sandboxes
// trust and the proxy mints leaf certificates from when it terminates TLS
// for a host with secrets. Its key never leaves the host.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex // guards leaves
	leaves map[string]*tls.Certificate
}

// LoadOrCreateCA loads the authority from dir (ca.pem, ca.key), or creates
// it there when neither file exists: ECDSA P-256, ca.pem mode 0644, ca.key
// mode 0600. A key readable by others, or one file without the other, is
// an error rather than something to repair silently.
func LoadOrCreateCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
		return createCA(dir)
	case certErr != nil:
		return nil, fmt.Errorf("reading CA certificate: %w", certErr)
	case keyErr != nil:
		return nil, fmt.Errorf("reading CA key: %w", keyErr)
	}
	if fi, err := os.Stat(keyPath); err != nil {
		return nil, fmt.Errorf("checking CA key: %w", err)
	} else if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("CA key %s has mode %v: want 0600", keyPath, fi.Mode().Perm())
	}
	return parseCA(certPEM, keyPEM)
}

func createCA(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"withruntime"}, CommonName: "withruntime egress CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding CA key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating CA directory: %w", err)
	}
	// The key first: a certificate without its key is an error on the next
	// load, a key without its certificate too, but neither is overwritten.
	if err := writeNew(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(dir, caCertFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	return parseCA(certPEM, keyPEM)
}

// writeNew writes a file that must not exist yet, with mode perm whatever
// the umask.
func writeNew(path string, data []byte, perm os.FileMode) (retErr error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Base(path), err)
	}
	defer func() {
		if cerr := f.Close(); retErr == nil && cerr != nil {
			retErr = fmt.Errorf("writing %s: %w", filepath.Base(path), cerr)
		}
		if retErr != nil {
			os.Remove(path)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("setting mode of %s: %w", filepath.Base(path), err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return f.Sync()
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("CA certificate: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("CA key: no PEM block")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing CA key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("CA key does not match its certificate")
	}
	if !cert.IsCA {
		return nil, errors.New("CA certificate is not a CA")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating leaf key: %w", err)
	}
	return &CA{cert: cert, certPEM: certPEM, key: key, leafKey: leafKey, leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the authority's certificate, for the sandboxes' trust stores.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Leaf returns a certificate for name signed by the authority, valid for a
// day, its only subject alternative name being name. Leaves are cached
// and share one key, made when the CA was loaded and never written down.
func (ca *CA) Leaf(name string) (*tls.Certificate, error) {
	name = normalize(name)
	if err := checkHostname(name); err != nil {
		return nil, fmt.Errorf("leaf for %q: %s", name, err)
	}
	now := time.Now()
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[name]; ok && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing leaf for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing leaf for %s: %w", name, err)
	}
	if len(ca.leaves) >= maxCached {
		clear(ca.leaves)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: ca.leafKey, Leaf: leaf}
	ca.leaves[name] = c
	return c, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
