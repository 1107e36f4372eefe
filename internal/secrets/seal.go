package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
)

// sealedPrefix starts a value SealString sealed; a stored value without it
// was written before values were sealed and is its own plain text.
const sealedPrefix = "sealed1:"

// SealString seals plain, bound to purpose (what it is, such as a
// webhook's id: a sealed value moved to another purpose does not open),
// as text that can be stored beside the rest of a record.
func (v *Vault) SealString(purpose, plain string) string {
	nonce := make([]byte, v.aead.NonceSize())
	rand.Read(nonce) // never fails (crypto/rand)
	ct := v.aead.Seal(nonce, nonce, []byte(plain), sealAD(purpose))
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(ct)
}

// OpenString opens what SealString sealed for purpose. A value without
// the sealed prefix is returned as it is (a record written before its
// field was sealed). Its errors never hold the value.
func (v *Vault) OpenString(purpose, stored string) (string, error) {
	rest, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return stored, nil
	}
	data, err := base64.RawStdEncoding.DecodeString(rest)
	n := v.aead.NonceSize()
	if err != nil || len(data) < n {
		return "", errors.New("a sealed value is malformed")
	}
	plain, err := v.aead.Open(nil, data[:n], data[n:], sealAD(purpose))
	if err != nil {
		return "", errors.New("a sealed value does not open with this installation's key for its purpose")
	}
	return string(plain), nil
}

func sealAD(purpose string) []byte { return []byte("withruntime-sealed-v1\x00" + purpose) }
