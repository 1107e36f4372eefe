package manager

import (
	"context"

	"github.com/withruntime/withruntime/internal/store"
)

// Store is what the manager reads and writes of internal/store: the
// sandboxes' records and the usage ledger, whole, and of the accounts and
// keys only what its limits read (an account's concurrency and host share,
// the daily limits of the keys a sandbox was made through).
type Store interface {
	store.Sandboxes
	store.Ledger
	GetAccount(ctx context.Context, id string) (*store.Account, error)
	ListAllKeys(ctx context.Context, account string) ([]store.Key, error)
}
