package e2bcompat

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/httpapi"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// accountsAPI is the API as the layer's bounds need it: keys and their
// accounts in a real store, sandboxes "<account>-<n>" running for the
// keys of their account, and every sandbox's /home/user/d a directory of
// n entries (dir). It stands in for the API because the watch room is
// the layer's own: what is checked is which account each key's watches
// count under.
type accountsAPI struct {
	st  store.Store
	dir http.Handler
}

func (a *accountsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secret, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sum := sha256.Sum256([]byte(secret))
	k, err := a.st.KeyByHash(r.Context(), sum[:])
	if err != nil {
		apiError(w, http.StatusUnauthorized, "unauthorized", "unknown API key")
		return
	}
	id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/sandboxes/"), "/")
	if !strings.HasPrefix(id, k.Account+"-") {
		apiError(w, http.StatusNotFound, "not_found", "no such sandbox")
		return
	}
	if rest == "" {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": id, "state": "running"})
		return
	}
	a.dir.ServeHTTP(w, r)
}

// dirAPI is bigDirAPI's files API with n entries of long names and short
// targets: a snapshot counts about 3 MiB, the listing's JSON twice that.
func dirAPI(n int) *bigDirAPI {
	var sb strings.Builder
	name := strings.Repeat("n", 250)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"name":"%s%05d","path":"/home/user/d/%s%05d","type":"file","size":1,"mode":420,"mtime":"2024-01-01T00:00:00Z"}`, name, i, name, i)
	}
	return &bigDirAPI{listing: []byte(sb.String()), n: n}
}

// TestWatchRoomPerAccount: an account's watches count under the account,
// whichever of its keys made them: with many keys and many sandboxes one
// account holds at most its share of the server's watch room, and another
// account still watches.
func TestWatchRoomPerAccount(t *testing.T) {
	st := storetest.OpenBolt(t)
	keyOf := func(account string, i int) string {
		secret := fmt.Sprintf("wr_%s_%d", account, i)
		sum := sha256.Sum256([]byte(secret))
		k := store.Key{ID: fmt.Sprintf("key-%s-%d", account, i), Account: account, Kind: store.KeyFull, Hash: sum[:], CreatedAt: time.Now()}
		if err := st.PutKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
		return secret
	}
	const keys = 48
	many := make([]string, keys)
	for i := range many {
		many[i] = keyOf("many", i)
	}
	other := keyOf("other", 0)

	api := &accountsAPI{st: st, dir: dirAPI(maxListed).handler()}
	s, err := New(Config{API: api, Secret: bytes.Repeat([]byte{7}, SecretSize), Accounts: httpapi.KeyAccounts(st)})
	if err != nil {
		t.Fatal(err)
	}
	watch := func(box, key string) int {
		req := httptest.NewRequest(http.MethodPost, "/filesystem.Filesystem/CreateWatcher", strings.NewReader(`{"path":"d"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(headerSandboxID, box)
		req.Header.Set(headerAccessToken, s.sealToken(box, key))
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		return w.Code
	}

	// Each key of "many" watches its own sandbox twice (the second is
	// still under a key's quarter of an account's bytes).
	held := 0
	for i, key := range many {
		for range 2 {
			switch code := watch(fmt.Sprintf("many-%d", i), key); code {
			case http.StatusOK:
				held++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("a watch of key %d: got %d, want 200 or 429", i, code)
			}
		}
	}
	// A snapshot counts 10,000 × (255 + entryCost) bytes.
	snap := int64(maxListed) * (255 + entryCost)
	if got, most := int64(held)*snap, int64(maxAccountWatchBytes); got > most || held == 0 {
		t.Errorf("one account with %d keys holds %d watches of %d bytes (%d), want 1 to %d bytes", keys, held, snap, got, most)
	}
	if code := watch("other-0", other); code != http.StatusOK {
		t.Errorf("another account's watch: got %d, want 200", code)
	}
}
