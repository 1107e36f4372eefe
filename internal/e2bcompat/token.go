package e2bcompat

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretSize is the size of Config.Secret.
const SecretSize = 32

// tokenPrefix marks our tokens, so a key pasted as a token is told apart.
const tokenPrefix = "wre2b_"

// errBadToken is every reason a token does not open: it says nothing more,
// to whoever holds one.
var errBadToken = errors.New("invalid access token")

// tokens seals the caller's withruntime key into the access tokens of one
// sandbox (AES-256-GCM, the sandbox id as additional data). They are
// stateless: a token works only for its sandbox, and only as long as the
// key it holds does (deleting the key revokes every token made from it).
//
// The nonce is derived from the sandbox id and the key (keyed by a
// second key taken from the secret), so one key's token for one sandbox is
// always the same string: clients keep the token of their first connect,
// and GCM never sees one nonce with two different messages.
type tokens struct {
	aead     cipher.AEAD
	nonceKey []byte
}

func newTokens(secret []byte) (*tokens, error) {
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("e2bcompat: secret is %d bytes, want %d", len(secret), SecretSize)
	}
	block, err := aes.NewCipher(secret)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("withruntime e2b token nonce"))
	return &tokens{aead: aead, nonceKey: m.Sum(nil)}, nil
}

// seal returns a token for sandbox id holding key.
func (t *tokens) seal(id, key string) string {
	m := hmac.New(sha256.New, t.nonceKey)
	m.Write([]byte(id))
	m.Write([]byte{0})
	m.Write([]byte(key))
	nonce := m.Sum(nil)[:t.aead.NonceSize()]
	out := t.aead.Seal(nonce, nonce, []byte(key), []byte(id))
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(out)
}

// open returns the key a token for sandbox id holds.
func (t *tokens) open(id, token string) (string, error) {
	raw, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return "", errBadToken
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) < t.aead.NonceSize() {
		return "", errBadToken
	}
	n := t.aead.NonceSize()
	key, err := t.aead.Open(nil, b[:n], b[n:], []byte(id))
	if err != nil || len(key) == 0 {
		return "", errBadToken
	}
	return string(key), nil
}

// sealToken and openToken are the plan's names for the server's tokens.
func (s *Server) sealToken(id, key string) string {
	tok := s.tokens.seal(id, key)
	s.known.add(id, tok)
	return tok
}

func (s *Server) openToken(id, token string) (string, error) { return s.tokens.open(id, token) }
