package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadSandboxCA: certificates pass (re-encoded, without what lies
// around them); a private key, a broken certificate, no certificate at
// all or something that is no file are refused, never skipped.
func TestReadSandboxCA(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.CertPEM()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	broken := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})

	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := ReadSandboxCA(write("two.pem", append(append([]byte("# a comment\n"), cert...), cert...)))
	if err != nil {
		t.Fatalf("two certificates: %v", err)
	}
	if want := string(cert) + string(cert); string(got) != want {
		t.Errorf("two certificates: got %q, want them alone, re-encoded: %q", got, want)
	}

	for _, tt := range []struct {
		name, path, want string
	}{
		{"key after a certificate", write("key.pem", append(append([]byte(nil), cert...), keyPEM...)), "PEM block 2 is a EC PRIVATE KEY"},
		{"broken certificate", write("broken.pem", broken), "PEM block 1:"},
		{"no certificate", write("empty.pem", []byte("hello\n")), "no PEM certificate"},
		{"DER", write("der.crt", der), "no PEM certificate"},
		{"missing", filepath.Join(dir, "nope.pem"), "no such file"},
		{"directory", dir, "not a regular file"},
	} {
		if _, err := ReadSandboxCA(tt.path); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got error %v, want one saying %q", tt.name, err, tt.want)
		}
	}
}
