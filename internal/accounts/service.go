package accounts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/withruntime/withruntime/internal/store"
)

// Store is what the rules read and write of internal/store: the accounts,
// whole; the keys, but for the lookup by hash (authentication's) and the
// unconditional removal; and the ledger's rows, read only.
type Store interface {
	store.Accounts
	PutKey(ctx context.Context, k store.Key) error
	PutKeyIf(ctx context.Context, k store.Key, check func(keys []store.Key) error) error
	ListKeys(ctx context.Context, account string) ([]store.Key, error)
	ListAllKeys(ctx context.Context, account string) ([]store.Key, error)
	DeleteKeyIf(ctx context.Context, id, account string, check func(keys []store.Key) error) error
	Usage(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error)
}

// Config is what the rules are made of; zero fields take the defaults.
type Config struct {
	Store Store
	// DefaultConcurrency is the concurrency of accounts that set none
	// (DefaultAccountConcurrency when 0). The manager must enforce the
	// same value.
	DefaultConcurrency int
	// Trial says whether and how trial accounts are handed out, and what
	// every trial account may run.
	Trial TrialConfig
	// DefaultSize is the size a create that names none gets (the
	// manager's): a trial's create without a size gets it, cut to the
	// trial's.
	DefaultSize Size
	// MaxKeysPerAccount bounds the keys an account holds and those its
	// keys make in a day (DefaultMaxKeysPerAccount when 0); the admin key
	// is not bound by it.
	MaxKeysPerAccount int
}

// Caller is who a request acts for, from its key.
type Caller struct {
	Account string
	KeyID   string
	Kind    store.KeyKind
}

// Service applies the rules. Its trial limiter counts in memory: each
// Service (each API server of a store) counts its own.
type Service struct {
	cfg    Config
	trials *trialLimiter
	// trialMu makes this process's trial accounts one at a time, so that
	// they do not pass the outstanding hours together.
	trialMu sync.Mutex
}

// New returns the Service of cfg, its zero fields set to the defaults.
// cfg's bounds are the caller's to validate (TrialConfig.Validate).
func New(cfg Config) *Service {
	if cfg.DefaultConcurrency == 0 {
		cfg.DefaultConcurrency = DefaultAccountConcurrency
	}
	cfg.Trial = cfg.Trial.WithDefaults()
	cfg.DefaultSize = cfg.DefaultSize.Or(DefaultSize)
	if cfg.MaxKeysPerAccount == 0 {
		cfg.MaxKeysPerAccount = DefaultMaxKeysPerAccount
	}
	return &Service{cfg: cfg, trials: newTrialLimiter(cfg.Trial.PerAddress, cfg.Trial.PerWindow, cfg.Trial.Window)}
}

// Config is s's configuration, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// randHex is n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
