package e2bcompat

import (
	"bytes"
	"strings"
	"testing"
)

func testTokens(t *testing.T, b byte) *tokens {
	t.Helper()
	tk, err := newTokens(bytes.Repeat([]byte{b}, SecretSize))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestTokenRoundTrip(t *testing.T) {
	tk := testTokens(t, 1)
	tok := tk.seal("sbx1", "wr_key")
	if strings.Contains(tok, "wr_key") {
		t.Fatalf("token %q shows the key", tok)
	}
	key, err := tk.open("sbx1", tok)
	if err != nil || key != "wr_key" {
		t.Fatalf("got %q, %v, want wr_key", key, err)
	}
	if again := tk.seal("sbx1", "wr_key"); again != tok {
		t.Errorf("second seal: got %q, want the same token %q", again, tok)
	}
	if other := tk.seal("sbx2", "wr_key"); other == tok {
		t.Errorf("another sandbox's token: got the same %q, want another", other)
	}
}

// A token opens only for its sandbox, only under its secret, and not once
// altered.
func TestTokenRefused(t *testing.T) {
	tk := testTokens(t, 1)
	tok := tk.seal("sbx1", "wr_key")
	flipped := []byte(tok)
	flipped[len(flipped)-3] ^= 1
	for _, c := range []struct {
		name, id, token string
		tk              *tokens
	}{
		{"other sandbox", "sbx2", tok, tk},
		{"other secret", "sbx1", tok, testTokens(t, 2)},
		{"altered", "sbx1", string(flipped), tk},
		{"no prefix", "sbx1", strings.TrimPrefix(tok, tokenPrefix), tk},
		{"a key", "sbx1", "wr_key", tk},
		{"empty", "sbx1", "", tk},
		{"short", "sbx1", tokenPrefix + "AAAA", tk},
	} {
		if key, err := c.tk.open(c.id, c.token); err == nil {
			t.Errorf("%s: got key %q, want an error", c.name, key)
		}
	}
}

func TestNewTokensSecretSize(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33} {
		if _, err := newTokens(make([]byte, n)); err == nil {
			t.Errorf("secret of %d bytes: got no error, want one", n)
		}
	}
}
