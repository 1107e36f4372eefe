package clusterpki

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/withruntime/withruntime/internal/store"
)

// maxCSRBytes bounds a certificate request read from a node's entry.
const maxCSRBytes = 8 << 10

// Issuer is what an API server issues node certificates through: the
// registry's entries and its conditional write.
type Issuer interface {
	ListNodes(ctx context.Context) ([]store.Node, error)
	SetNodeCert(ctx context.Context, id string, epoch int64, csr, cert string) error
}

// IssueNode issues the certificate node entry n asks for, unless its Cert
// is already one of this authority for the CSR's key with more than half
// its life left, and writes it to st (conditional on the entry's epoch
// and CSR: a node that registered again meanwhile is not given it). It
// reports whether it wrote one. Only a live entry is served, and the
// certificate names the entry's ID as a node, whatever the CSR says: a
// request says which key, the registry which node.
func (a *Authority) IssueNode(ctx context.Context, st Issuer, n store.Node) (bool, error) {
	if n.CSR == "" || n.Lost || n.Expired {
		return false, nil
	}
	now := time.Now()
	if !a.needsCert(n, now) {
		return false, nil
	}
	chain, err := a.sign(n.ID, n.CSR, now)
	if err != nil {
		return false, fmt.Errorf("node %s: %w", n.ID, err)
	}
	if err := st.SetNodeCert(ctx, n.ID, n.Epoch, n.CSR, chain); err != nil {
		if errors.Is(err, store.ErrStale) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// IssueNodes is IssueNode for every entry of the registry.
func (a *Authority) IssueNodes(ctx context.Context, st Issuer) error {
	nodes, err := st.ListNodes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		if _, err := a.IssueNode(ctx, st, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RunIssuer runs IssueNodes every interval until ctx ends. Every API
// server runs it: two issuing for one request both give a valid
// certificate for the node's key.
func (a *Authority) RunIssuer(ctx context.Context, st Issuer, every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := a.IssueNodes(ctx, st); err != nil && ctx.Err() == nil {
			logger.Warn("issuing node certificates", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// needsCert reports whether entry n's Cert is not a certificate of this
// authority for its CSR's key with more than half its life left.
func (a *Authority) needsCert(n store.Node, now time.Time) bool {
	csr, err := parseCSR(n.CSR)
	if err != nil {
		return true // sign refuses it, with the reason
	}
	chain, err := parseChain(n.Cert)
	if err != nil || len(chain) == 0 {
		return true
	}
	leaf := chain[0]
	if verify(a.roots, chain, NodeURI(n.ID), x509.ExtKeyUsageServerAuth) != nil {
		return true
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(csr.PublicKey) {
		return true
	}
	// Half the life from the issue, not from the backdated start.
	issued := leaf.NotBefore.Add(backdate)
	return !now.Before(issued.Add(leaf.NotAfter.Sub(issued) / 2))
}

// sign is the chain (PEM: leaf, authority) certifying the key of csrPEM
// as node id, for servers only.
func (a *Authority) sign(id, csrPEM string, now time.Time) (string, error) {
	if err := checkNodeID(id); err != nil {
		return "", err
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return "", err
	}
	der, err := a.certify(csr.PublicKey, NodeURI(id), x509.ExtKeyUsageServerAuth, now)
	if err != nil {
		return "", err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return string(append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.cert.Raw})...)), nil
}

// parseCSR reads a node's certificate request: PEM, bounded, signed by
// its own key (so that the node holds it), an ECDSA P-256 key.
func parseCSR(p string) (*x509.CertificateRequest, error) {
	if len(p) > maxCSRBytes {
		return nil, fmt.Errorf("certificate request of %d bytes, more than %d", len(p), maxCSRBytes)
	}
	b, _ := pem.Decode([]byte(p))
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("not a certificate request")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request not signed by its key: %w", err)
	}
	if pub, ok := csr.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		return nil, errors.New("certificate request is not for an ECDSA P-256 key")
	}
	return csr, nil
}

// parseChain reads PEM certificates.
func parseChain(p string) ([]*x509.Certificate, error) {
	rest := []byte(p)
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s in a certificate chain", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
