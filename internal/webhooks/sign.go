package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every webhook secret.
const SecretPrefix = "whsec_"

// Signature headers (Standard Webhooks).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// NewSecret returns a new webhook secret: whsec_ and 32 random bytes in
// base64.
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// secretKey is the HMAC key of secret.
func secretKey(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(k) == 0 {
		return nil, errors.New("webhooks: the secret is not whsec_ and base64")
	}
	return k, nil
}

// Sign returns the webhook-signature header's value for a message with id
// sent at ts with body: "v1," and the base64 HMAC-SHA256 of
// "id.timestamp.body".
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, ts.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// Verify checks a delivery's headers against body, as a receiver does: one
// of the space-separated signatures must match, and the timestamp must be
// within tolerance of now.
func Verify(secret, id, timestamp, signatures string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return errors.New("webhooks: bad timestamp")
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return errors.New("webhooks: timestamp out of tolerance")
	}
	want, err := Sign(secret, id, ts, body)
	if err != nil {
		return err
	}
	for _, s := range strings.Fields(signatures) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return errors.New("webhooks: no signature matches")
}
