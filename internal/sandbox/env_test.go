package sandbox

import (
	"slices"
	"testing"
)

// TestEnv pins the environment both tiers give a sandbox's agent: PATH,
// the request's variables sorted, the trust store's ones the request does
// not override, and the list of keys the agent passes on.
func TestEnv(t *testing.T) {
	got := Env(map[string]string{"B": "2", "A": "1", "SSL_CERT_FILE": "/mine.pem"}, CAEnv[:2])
	want := []string{
		"PATH=" + DefaultPath,
		"A=1", "B=2", "SSL_CERT_FILE=/mine.pem",
		"REQUESTS_CA_BUNDLE=" + CABundlePath,
		"WITHRUNTIME_ENV_KEYS=A,B,SSL_CERT_FILE,REQUESTS_CA_BUNDLE",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got, want := Env(nil, nil), []string{"PATH=" + DefaultPath, "WITHRUNTIME_ENV_KEYS="}; !slices.Equal(got, want) {
		t.Errorf("empty: got %q, want %q", got, want)
	}
}
