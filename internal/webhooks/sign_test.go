package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"
)

// verifyIndependently is the Standard Webhooks check as a receiver writes
// it from the spec, sharing no code with Sign: the key is the base64 after
// whsec_, the signed content "id.timestamp.body", and the header's value
// "v1," and the base64 HMAC-SHA256.
func verifyIndependently(t *testing.T, secret, id, ts, header string, body []byte) bool {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	if err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Split(header, " ") {
		version, value, _ := strings.Cut(sig, ",")
		if version == "v1" && hmac.Equal([]byte(value), []byte(want)) {
			return true
		}
	}
	return false
}

func TestSign(t *testing.T) {
	secret := NewSecret()
	if !strings.HasPrefix(secret, "whsec_") || secret == NewSecret() {
		t.Fatalf("secret %q: want whsec_ and random bytes", secret)
	}
	body := []byte(`{"type":"sandbox.created"}`)
	ts := time.Unix(1_700_000_000, 0)
	sig, err := Sign(secret, "evt_1", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	if !verifyIndependently(t, secret, "evt_1", "1700000000", sig, body) {
		t.Fatalf("signature %q does not verify", sig)
	}
	for _, c := range []struct{ id, ts, body string }{
		{"evt_2", "1700000000", string(body)},
		{"evt_1", "1700000001", string(body)},
		{"evt_1", "1700000000", `{"type":"sandbox.ended"}`},
	} {
		if verifyIndependently(t, secret, c.id, c.ts, sig, []byte(c.body)) {
			t.Errorf("signature verifies for a changed message %+v", c)
		}
	}
	if verifyIndependently(t, NewSecret(), "evt_1", "1700000000", sig, body) {
		t.Error("signature verifies with another secret")
	}
	// Verify, the package's own receiver side, agrees and checks the time.
	if err := Verify(secret, "evt_1", "1700000000", "v1,bogus "+sig, body, ts.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if err := Verify(secret, "evt_1", strconv.FormatInt(ts.Unix(), 10), sig, body, ts.Add(time.Hour), 5*time.Minute); err == nil {
		t.Error("Verify took a timestamp an hour old")
	}
	if _, err := Sign("whsec_!!", "evt_1", ts, body); err == nil {
		t.Error("Sign took a secret that is not base64")
	}
}

// TestSignVector pins one signature: sdk/python/tests/test_webhook_verify.py
// checks the docs' verification snippet against the same vector, so the
// snippet and the server agree.
func TestSignVector(t *testing.T) {
	got, err := Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "evt_1", time.Unix(1700000000, 0), []byte(`{"type":"sandbox.created"}`))
	if want := "v1,emQol+O3w9E3+SNBfGK3kW0WOckDpI1JPvdscfvI6kQ="; err != nil || got != want {
		t.Fatalf("Sign = %q, %v; want %q", got, err, want)
	}
}
