package accounts

import (
	"crypto/sha256"
	"regexp"
	"testing"

	"github.com/withruntime/withruntime/internal/store"
)

// TestNewKeyFormats: each format writes the secret its own way, the key's
// record is the same whatever the format, and the record holds the hash of
// the secret as given (the API finds a key by that hash).
func TestNewKeyFormats(t *testing.T) {
	shapes := map[string]*regexp.Regexp{
		"":                   regexp.MustCompile(`^wr_[A-Za-z0-9_-]{43}$`),
		KeyFormatWithruntime: regexp.MustCompile(`^wr_[A-Za-z0-9_-]{43}$`),
		// E2B's SDKs that check a key want "e2b_" and lowercase hex.
		KeyFormatE2B: regexp.MustCompile(`^e2b_[0-9a-f]{64}$`),
	}
	for format, shape := range shapes {
		seen := map[string]bool{}
		for range 20 {
			secret, k := NewKeyFormat("acct1", store.KeyReadOnly, format)
			if !shape.MatchString(secret) {
				t.Fatalf("format %q: secret %q does not match %s", format, secret, shape)
			}
			if seen[secret] {
				t.Fatalf("format %q: secret %q made twice", format, secret)
			}
			seen[secret] = true
			if sum := sha256.Sum256([]byte(secret)); string(k.Hash) != string(sum[:]) {
				t.Errorf("format %q: the record's hash is not the secret's", format)
			}
			if k.Account != "acct1" || k.Kind != store.KeyReadOnly || len(k.ID) != len("key_")+24 || k.CreatedAt.IsZero() {
				t.Errorf("format %q: record %+v", format, k)
			}
		}
	}
}
