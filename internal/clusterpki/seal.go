package clusterpki

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SealKeySize is the size of the key the authority's key is sealed with.
const SealKeySize = 32

// ErrWrongSealKey is the error of opening an authority sealed with another
// key (or one that was changed in the store).
var ErrWrongSealKey = errors.New("the installation's authority is sealed with another key")

// sealAAD binds a sealed key to the certificate kept with it: a
// certificate swapped in the store does not open.
const sealAAD = "withruntime authority key v1\x00"

// NewSealKey returns a fresh seal key.
func NewSealKey() []byte {
	k := make([]byte, SealKeySize)
	rand.Read(k) // never fails (crypto/rand)
	return k
}

// FormatSealKey is a seal key as kept in a file or the environment (hex).
func FormatSealKey(k []byte) string { return hex.EncodeToString(k) }

// ParseSealKey reads a seal key in FormatSealKey's form (spaces around it
// are ignored).
func ParseSealKey(s string) ([]byte, error) {
	k, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(k) != SealKeySize {
		return nil, fmt.Errorf("not a seal key: want %d hex digits", 2*SealKeySize)
	}
	return k, nil
}

func sealGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != SealKeySize {
		return nil, fmt.Errorf("seal key is %d bytes, want %d", len(key), SealKeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// seal encrypts plain with key, bound to certDER.
func seal(key, plain, certDER []byte) ([]byte, error) {
	g, err := sealGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize())
	rand.Read(nonce)
	return g.Seal(nonce, nonce, plain, append([]byte(sealAAD), certDER...)), nil
}

// unseal is seal's inverse.
func unseal(key, sealed, certDER []byte) ([]byte, error) {
	g, err := sealGCM(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < g.NonceSize()+g.Overhead() {
		return nil, errors.New("the installation's authority is damaged: its sealed key is cut short")
	}
	n := g.NonceSize()
	plain, err := g.Open(nil, sealed[:n], sealed[n:], append([]byte(sealAAD), certDER...))
	if err != nil {
		return nil, ErrWrongSealKey
	}
	return plain, nil
}
