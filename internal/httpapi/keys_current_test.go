package httpapi

import (
	"net/http"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/store"
)

// GET /v1/keys/current shows each key itself, never its secret.
func TestCurrentKey(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		kind        store.KeyKind
		id, account string
	}{
		{store.KeyAdmin, "key-0", "admin"},
		{store.KeyFull, "key-1", "acct1"},
		{store.KeyReadOnly, "key-2", "acct1"},
	} {
		resp := e.do("GET", "/v1/keys/current", e.keys[tc.kind], nil)
		var k api.Key
		decodeStrict(t, resp, &k)
		if resp.StatusCode != http.StatusOK || k.ID != tc.id || k.Kind != string(tc.kind) || k.Account != tc.account || k.Secret != "" {
			t.Fatalf("%s key: got %d %+v, want id %s of %s and no secret", tc.kind, resp.StatusCode, k, tc.id, tc.account)
		}
	}
	if resp := e.do("GET", "/v1/keys/current", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: got %d, want 401", resp.StatusCode)
	}
}
