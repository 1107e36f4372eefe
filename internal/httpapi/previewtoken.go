package httpapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"
)

// PreviewSecretSize is the size of Config.PreviewSecret.
const PreviewSecretSize = 32

// previewTokenPrefix marks preview tokens, so that one is told apart from
// a key at a glance (and in a leak scanner's rules).
const previewTokenPrefix = "wrpt_"

// errPreviewToken is every reason a token does not open: whoever holds one
// learns nothing more.
var errPreviewToken = errors.New("invalid or expired preview token")

// previewClaims is what a preview token holds. The sandbox's id is not in
// it but bound to it (the seal's additional data): a token opens for its
// sandbox only.
type previewClaims struct {
	account    string
	port       int // 0: every port of the sandbox
	generation int64
	expires    time.Time
}

// previewTokens seals claims (AES-256-GCM under a key derived from the
// server's preview secret). A token is stateless: it holds no key, and a
// revoke (the sandbox's preview generation moving on) voids it.
type previewTokens struct {
	aead cipher.AEAD
}

func newPreviewTokens(secret []byte) (*previewTokens, error) {
	if secret == nil {
		secret = make([]byte, PreviewSecretSize)
		rand.Read(secret)
	}
	if len(secret) != PreviewSecretSize {
		return nil, errors.New("httpapi: the preview secret must be 32 bytes")
	}
	// A key of its own, so that the secret serves no other purpose even if
	// one day it is shared with one.
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("withruntime preview tokens v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &previewTokens{aead: aead}, nil
}

func (t *previewTokens) seal(id string, c previewClaims) string {
	plain := make([]byte, 0, 20+len(c.account))
	plain = binary.BigEndian.AppendUint64(plain, uint64(c.expires.Unix()))
	plain = binary.BigEndian.AppendUint64(plain, uint64(c.generation))
	plain = binary.BigEndian.AppendUint16(plain, uint16(c.port))
	plain = append(plain, c.account...)
	nonce := make([]byte, t.aead.NonceSize())
	rand.Read(nonce)
	out := t.aead.Seal(nonce, nonce, plain, []byte(id))
	return previewTokenPrefix + base64.RawURLEncoding.EncodeToString(out)
}

// open returns the claims of a token for sandbox id that has not expired
// at now.
func (t *previewTokens) open(id, token string, now time.Time) (previewClaims, error) {
	raw, ok := strings.CutPrefix(token, previewTokenPrefix)
	if !ok || len(raw) > 512 {
		return previewClaims{}, errPreviewToken
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	n := t.aead.NonceSize()
	if err != nil || len(b) < n {
		return previewClaims{}, errPreviewToken
	}
	plain, err := t.aead.Open(nil, b[:n], b[n:], []byte(id))
	if err != nil || len(plain) < 19 {
		return previewClaims{}, errPreviewToken
	}
	c := previewClaims{
		expires:    time.Unix(int64(binary.BigEndian.Uint64(plain[0:8])), 0),
		generation: int64(binary.BigEndian.Uint64(plain[8:16])),
		port:       int(binary.BigEndian.Uint16(plain[16:18])),
		account:    string(plain[18:]),
	}
	if c.account == "" || !now.Before(c.expires) {
		return previewClaims{}, errPreviewToken
	}
	return c, nil
}
