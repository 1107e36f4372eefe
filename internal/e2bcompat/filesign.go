package e2bcompat

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Pre-signed /files URLs: E2B's clients sign "<path>:<read|write>:<user>:
// <envdAccessToken>[:<expiration>]" with SHA-256 and send
// signature=v1_<base64, no padding> (and signature_expiration=<unix s>).
// The access token is the secret, so a signature proves its maker held it.

var errBadSignature = errors.New("invalid signature")

// fileSignature is the signature of a request for path with operation op
// ("read" or "write") as user, under token, expiring at exp (0: never).
// path and user are exactly as the client sent them.
func fileSignature(path, op, user, token string, exp int64) string {
	s := path + ":" + op + ":" + user + ":" + token
	if exp != 0 {
		s += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(s))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

// checkFileSignature verifies a pre-signed request's signature and
// expiration (expStr "" means none) at now.
func checkFileSignature(sig, expStr, path, op, user, token string, now time.Time) error {
	var exp int64
	if expStr != "" {
		var err error
		exp, err = strconv.ParseInt(expStr, 10, 64)
		if err != nil || exp <= 0 {
			return errors.New("invalid signature_expiration")
		}
		if now.Unix() > exp {
			return errors.New("signature is already expired")
		}
	}
	want := fileSignature(path, op, user, token, exp)
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return errBadSignature
	}
	return nil
}
