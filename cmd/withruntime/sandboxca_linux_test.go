package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestServeSandboxCA: --sandbox-ca is repeatable, and a file that is not
// PEM certificates stops serve at its flags (exit 2, the file and the
// reason named) before any server starts.
func TestServeSandboxCA(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxy root"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("root.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	other := write("other.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	kder, _ := x509.MarshalECPrivateKey(key)
	withKey := write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	notPEM := write("notpem.pem", []byte("hello"))

	cfg, code, stderr := serveConfig(t, "--sandbox-ca", good, "--sandbox-ca", other)
	if code != 0 || cfg == nil || !reflect.DeepEqual(cfg.SandboxCA, []string{good, other}) {
		t.Fatalf("two good files: got exit %d, stderr %q, config %v", code, stderr, cfg)
	}
	if cfg, code, _ := serveConfig(t); code != 0 || len(cfg.SandboxCA) != 0 {
		t.Fatalf("no --sandbox-ca: got exit %d, SandboxCA %v, want none", code, cfg.SandboxCA)
	}
	for _, tt := range []struct{ name, path, want string }{
		{"a private key", withKey, "PEM block 1 is a EC PRIVATE KEY"},
		{"not PEM", notPEM, "no PEM certificate"},
		{"missing", filepath.Join(dir, "nope.pem"), "no such file"},
	} {
		cfg, code, stderr := serveConfig(t, "--sandbox-ca", good, "--sandbox-ca", tt.path)
		if code != 2 || cfg != nil {
			t.Errorf("%s: got exit %d and a start %v, want 2 and no start", tt.name, code, cfg != nil)
		}
		if !strings.Contains(stderr, "--sandbox-ca") || !strings.Contains(stderr, tt.path) || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: got stderr %q, want it to name --sandbox-ca, %s and %q", tt.name, stderr, tt.path, tt.want)
		}
	}
}
