package secrets

import (
	"strings"
	"testing"
)

// TestSealString: a sealed value holds nothing of its plain text, opens
// for its purpose only, and a value stored before sealing opens as itself.
func TestSealString(t *testing.T) {
	v, _, _, _ := testVault(t)
	sealed := v.SealString("wh_1", "whsec_topsecret")
	if strings.Contains(sealed, "topsecret") || !strings.HasPrefix(sealed, sealedPrefix) || sealed == v.SealString("wh_1", "whsec_topsecret") {
		t.Fatalf("sealed: %q", sealed)
	}
	if got, err := v.OpenString("wh_1", sealed); err != nil || got != "whsec_topsecret" {
		t.Fatalf("open: %q, %v", got, err)
	}
	if _, err := v.OpenString("wh_2", sealed); err == nil {
		t.Fatal("a value sealed for wh_1 opened for wh_2")
	}
	b := []byte(sealed)
	if b[20] == 'A' {
		b[20] = 'B'
	} else {
		b[20] = 'A'
	}
	if _, err := v.OpenString("wh_1", string(b)); err == nil {
		t.Fatal("a changed value opened")
	}
	if got, err := v.OpenString("wh_1", "whsec_old"); err != nil || got != "whsec_old" {
		t.Fatalf("a value stored before sealing: %q, %v", got, err)
	}
}
