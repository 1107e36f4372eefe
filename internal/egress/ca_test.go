package egress

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"ca.pem": 0o644, "ca.key": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), want)
		}
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
		t.Error("a second load made a new CA")
	}

	leaf, err := ca.Leaf("API.test")
	if err != nil {
		t.Fatal(err)
	}
	roots := pool(t, ca.CertPEM())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: roots}); err != nil {
		t.Errorf("leaf does not verify for api.test: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: roots}); err == nil {
		t.Error("leaf verifies for other.test")
	}
	if got := leaf.Leaf.DNSNames; len(got) != 1 || got[0] != "api.test" {
		t.Errorf("SANs %v, want [api.test]", got)
	}
	if d := time.Until(leaf.Leaf.NotAfter); d > 25*time.Hour {
		t.Errorf("leaf valid for %v, want about a day", d)
	}
	if cached, _ := ca.Leaf("api.test"); cached != leaf {
		t.Error("leaf not cached")
	}
	if _, err := ca.Leaf("bad name"); err == nil {
		t.Error("a leaf for a bad name")
	}

	t.Run("refuses a key readable by others", func(t *testing.T) {
		os.Chmod(filepath.Join(dir, "ca.key"), 0o644)
		if _, err := LoadOrCreateCA(dir); err == nil {
			t.Error("loaded a world-readable key")
		}
	})
	t.Run("refuses a certificate without its key", func(t *testing.T) {
		os.Remove(filepath.Join(dir, "ca.key"))
		if _, err := LoadOrCreateCA(dir); err == nil {
			t.Error("loaded without a key")
		}
	})
}
