package httpapi

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/store"
)

// interleaveStore is the store as one API server sees it while another
// server writes to it too: the first account or key call of a request
// runs other (on the store underneath) right after a read and right
// before a write. A rule checked over a read that is not the write's own
// transaction breaks under it.
type interleaveStore struct {
	store.Store
	once  sync.Once
	other func()
}

func (s *interleaveStore) interleave() { s.once.Do(s.other) }

func (s *interleaveStore) ListKeys(ctx context.Context, account string) ([]store.Key, error) {
	defer s.interleave()
	return s.Store.ListKeys(ctx, account)
}

func (s *interleaveStore) GetAccount(ctx context.Context, id string) (*store.Account, error) {
	defer s.interleave()
	return s.Store.GetAccount(ctx, id)
}

func (s *interleaveStore) PutKey(ctx context.Context, k store.Key) error {
	s.interleave()
	return s.Store.PutKey(ctx, k)
}

func (s *interleaveStore) PutKeyIf(ctx context.Context, k store.Key, check func([]store.Key) error) error {
	s.interleave()
	return s.Store.PutKeyIf(ctx, k, check)
}

func (s *interleaveStore) DeleteKey(ctx context.Context, id string) error {
	s.interleave()
	return s.Store.DeleteKey(ctx, id)
}

func (s *interleaveStore) DeleteKeyIf(ctx context.Context, id, account string, check func([]store.Key) error) error {
	s.interleave()
	return s.Store.DeleteKeyIf(ctx, id, account, check)
}

func (s *interleaveStore) PutAccount(ctx context.Context, a store.Account) error {
	s.interleave()
	return s.Store.PutAccount(ctx, a)
}

func (s *interleaveStore) CreateAccount(ctx context.Context, a store.Account) error {
	s.interleave()
	return s.Store.CreateAccount(ctx, a)
}

// newInterleavedEnv is newEnv whose server's store runs other once, at
// the first account or key call after arm.
func newInterleavedEnv(t *testing.T) (e *testEnv, arm func(other func())) {
	var ist *interleaveStore
	e = newEnv(t, func(c *Config) {
		ist = &interleaveStore{Store: c.Store.(store.Store)}
		ist.once.Do(func() {}) // disarmed
		c.Store = ist
	})
	return e, func(other func()) {
		ist.once = sync.Once{}
		ist.other = other
	}
}

func TestAccountNameTakenMeanwhile(t *testing.T) {
	e, arm := newInterleavedEnv(t)
	arm(func() {
		if err := e.store.PutAccount(context.Background(), store.Account{ID: "team", Name: "team", Concurrency: 3, CreatedAt: time.Now()}); err != nil {
			t.Error(err)
		}
	})
	wantStatus(t, e.doJSON("POST", "/v1/accounts", e.keys[store.KeyAdmin], `{"name":"team","concurrency":9}`), 409, "conflict")
	a, err := e.store.GetAccount(t.Context(), "team")
	if err != nil {
		t.Fatal(err)
	}
	if a.Concurrency != 3 {
		t.Fatalf("account made meanwhile: concurrency %d, want 3 (not overwritten)", a.Concurrency)
	}
}

func TestMakerRemovedMeanwhile(t *testing.T) {
	e, arm := newInterleavedEnv(t)
	before, err := e.store.ListAllKeys(t.Context(), "acct1")
	if err != nil {
		t.Fatal(err)
	}
	// Another server removes the full key of acct1 while it makes a key.
	arm(func() {
		if err := e.store.DeleteKey(context.Background(), "key-1"); err != nil {
			t.Error(err)
		}
	})
	wantStatus(t, e.doJSON("POST", "/v1/keys", e.keys[store.KeyFull], `{"kind":"read_only"}`), 401, "unauthorized")
	after, err := e.store.ListAllKeys(t.Context(), "acct1")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("keys of acct1: %d before, %d after; want no key made by a removed key", len(before), len(after))
	}
}

func TestLastAdminRemovedMeanwhile(t *testing.T) {
	e, arm := newInterleavedEnv(t)
	sum := sha256.Sum256([]byte("wr_second-admin"))
	if err := e.store.PutKey(t.Context(), store.Key{ID: "key-admin2", Account: "admin", Kind: store.KeyAdmin, Hash: sum[:], CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Another server removes the second admin key while this one removes
	// the first: of the two removals, one must fail.
	arm(func() {
		if err := e.store.DeleteKey(context.Background(), "key-admin2"); err != nil {
			t.Error(err)
		}
	})
	wantStatus(t, e.do("DELETE", "/v1/keys/key-0", e.keys[store.KeyAdmin], nil), 409, "conflict")
	sum = sha256.Sum256([]byte(e.keys[store.KeyAdmin]))
	if k, err := e.store.KeyByHash(t.Context(), sum[:]); err != nil || k.ID != "key-0" {
		t.Fatalf("admin key after the refused removal: got %v, %v; want key-0 kept", k, err)
	}
}
