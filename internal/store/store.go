// Package store is withruntime's persistence: sandbox records, API keys,
// accounts, the usage ledger, sealed secrets, the node registry, the
// installation's values and the templates' records. Each kind of record has
// its own interface (Sandboxes, Ledger, Keys, Accounts, Secrets, Nodes,
// Values, Locks, Templates), and
// Store is their composition, for what opens, wires and closes a store
// (internal/server). Every other user declares, in its own package, the
// interface of what it calls: the kinds it uses whole, embedded, and the
// single methods of the others (one that uses a single kind whole takes
// that kind's interface, as secrets.Open takes Secrets).
//
// Bolt is the embedded implementation (one bbolt file in the data dir) for
// a single box, and what the unit tests of the packages above use
// (storetest.OpenBolt); Postgres is the shared one for many hosts (pgx;
// migrations embedded from migrations/ and applied at open). One suite
// runs against both, and no type of a storage engine appears in the
// interfaces.
//
// It imports internal/sandbox and internal/template (the domain's records)
// and nothing else of this module: the manager and the HTTP server depend
// on it, never the reverse.
package store

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Store keeps what must outlive a server process: every kind of record.
// Implementations are safe for concurrent use. Absent records are
// reported as not_found-kind errors (errors.Is(err, sandbox.ErrNotFound)).
type Store interface {
	Sandboxes
	Ledger
	Keys
	Accounts
	Secrets
	// Nodes is the registry of the installation's nodes (cluster.go).
	Nodes
	Values
	Locks
	// Templates keeps the templates' records (templates.go).
	Templates
	// Events keeps the event log, the webhooks and the audit log
	// (events.go).
	Events
	// Snapshots keeps the sandboxes' snapshots (snapshots.go).
	Snapshots
	// Volumes keeps the named volumes' records (volumes.go).
	Volumes

	Close() error
}

// Sandboxes keeps the sandboxes' records.
type Sandboxes interface {
	// PutSandbox inserts the record (r.Version 0: it must not exist yet)
	// or replaces the stored one whose version is r.Version. On success
	// r.Version is the new version. A record whose version moved on
	// meanwhile is not written: the error is ErrStale (conflict kind), and
	// so is an insert of an id that exists.
	PutSandbox(ctx context.Context, r *sandbox.Record) error
	// AdmitSandbox is PutSandbox for a record that becomes live (starting
	// or running): in the same transaction it refuses, with a
	// concurrency_limit_reached error, when the record's account already
	// has limit live records other than this one (limit 0: no limit).
	// Concurrency limits hold across every process of a store this way.
	AdmitSandbox(ctx context.Context, r *sandbox.Record, limit int) error
	GetSandbox(ctx context.Context, id string) (*sandbox.Record, error)
	// ListSandboxes returns the records that pass f, oldest first.
	ListSandboxes(ctx context.Context, f SandboxFilter) ([]*sandbox.Record, error)
	DeleteSandbox(ctx context.Context, id string) error
}

// Keys keeps the API keys.
type Keys interface {
	// PutKey inserts the key or replaces the one with its ID. Two keys never
	// share a hash.
	PutKey(ctx context.Context, k Key) error
	// KeyByHash finds the key whose secret hashes to hash (SHA-256).
	KeyByHash(ctx context.Context, hash []byte) (*Key, error)
	// ListKeys returns the keys of account, oldest first; every key when
	// account is empty.
	ListKeys(ctx context.Context, account string) ([]Key, error)
	// DeleteKey removes the key and every key made through it (its
	// descendants, see Key.Parent) in one step: their secrets stop working
	// at once. They are kept as removed keys for ListAllKeys.
	DeleteKey(ctx context.Context, id string) error
	// ListAllKeys returns ListKeys(account) and the account's removed keys
	// (RemovedAt set), oldest first: what a removed key spent still counts
	// against the daily limits of the keys it was made through.
	ListAllKeys(ctx context.Context, account string) ([]Key, error)
	// PutKeyIf inserts k after check accepts the keys of k's account
	// (ListKeys), read in the same transaction as the insert: rules over
	// an account's keys (how many it may hold, what a key may make) hold
	// across every process of a store. check's error is returned as is.
	PutKeyIf(ctx context.Context, k Key, check func(keys []Key) error) error
	// DeleteKeyIf is DeleteKey after check accepts the keys of account
	// (every key when account is ""), read in the same transaction: the
	// last admin key cannot be removed by two racing calls.
	DeleteKeyIf(ctx context.Context, id, account string, check func(keys []Key) error) error
}

// Accounts keeps the accounts.
type Accounts interface {
	// PutAccount inserts the account or replaces the one with its ID.
	PutAccount(ctx context.Context, a Account) error
	// CreateAccount inserts a new account; an account with its ID or its
	// Name (when set) already existing is a conflict-kind error, in one
	// transaction.
	CreateAccount(ctx context.Context, a Account) error
	GetAccount(ctx context.Context, id string) (*Account, error)
	// ListAccounts returns every account, oldest first.
	ListAccounts(ctx context.Context) ([]Account, error)
}

// Ledger keeps the usage ledger: what sandboxes ran, by day, account and
// key.
type Ledger interface {
	// RecordUsage replaces the sandbox record and adds delta to the usage
	// ledger in one transaction: the record's Usage says what the ledger
	// has counted, so after a crash neither is ahead of the other. It is
	// conditional like PutSandbox (ErrStale, and then the ledger is not
	// changed either): a bill is never counted twice.
	RecordUsage(ctx context.Context, r *sandbox.Record, delta UsageDelta) error
	// Usage returns the ledger's rows that pass f, by day, account and key.
	Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error)
}

// Secrets keeps the accounts' sealed secrets.
type Secrets interface {
	// PutSecret inserts the secret or replaces the one of its account with
	// its name.
	PutSecret(ctx context.Context, s Secret) error
	// ListSecrets returns the secrets of account, by name.
	ListSecrets(ctx context.Context, account string) ([]Secret, error)
	DeleteSecret(ctx context.Context, account, name string) error
}

// Values keeps the installation's values: made once, shared by every
// process.
type Values interface {
	// InitValue stores value under name unless a value is stored there
	// already, and returns the stored one: the first process of an
	// installation makes its authority, vault key and the like, and every
	// later one uses those.
	InitValue(ctx context.Context, name string, value []byte) ([]byte, error)
}

// Locks are the installation-wide locks.
type Locks interface {
	// TryLock takes the installation-wide lock name if no process holds it,
	// and reports whether it did; unlock releases it. A process that dies
	// loses its locks. Locks only keep duties from running twice at once:
	// what they do must stay correct without them (conditional writes).
	TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error)
}

// ErrStale is the error of a conditional write whose record changed since
// it was read (or, for an insert, exists).
var ErrStale = sandbox.Errorf(sandbox.KindConflict, "the record changed meanwhile")

// SandboxFilter selects sandboxes. Zero fields select everything.
type SandboxFilter struct {
	Account string
	// Node selects the records of one node ("" every node's).
	Node   string
	States []sandbox.State
}

// Match reports whether r passes the filter.
func (f SandboxFilter) Match(r *sandbox.Record) bool {
	if f.Account != "" && r.Account != f.Account || f.Node != "" && r.Node != f.Node {
		return false
	}
	if len(f.States) == 0 {
		return true
	}
	for _, s := range f.States {
		if r.State == s {
			return true
		}
	}
	return false
}

// KeyKind is what an API key may do. The names are part of the wire
// contract and must not change.
type KeyKind string

const (
	// KeyAdmin is the operator's key: it manages accounts and their keys
	// and acts as its own account.
	KeyAdmin KeyKind = "admin"
	// KeyFull does everything within its account.
	KeyFull KeyKind = "full"
	// KeyReadOnly reads everything its account may read and changes nothing.
	KeyReadOnly KeyKind = "read_only"
)

// Valid reports whether k is one of the known kinds.
func (k KeyKind) Valid() bool {
	return k == KeyAdmin || k == KeyFull || k == KeyReadOnly
}

// checkKey refuses keys no store may hold.
func checkKey(k Key) error {
	switch {
	case k.ID == "":
		return sandbox.Errorf(sandbox.KindInvalid, "key needs an id")
	case k.Account == "":
		return sandbox.Errorf(sandbox.KindInvalid, "key %s needs an account", k.ID)
	case !k.Kind.Valid():
		return sandbox.Errorf(sandbox.KindInvalid, "key %s has unknown kind %q", k.ID, k.Kind)
	case len(k.Hash) != sha256.Size:
		return sandbox.Errorf(sandbox.KindInvalid, "key %s: hash is %d bytes, want %d", k.ID, len(k.Hash), sha256.Size)
	}
	return nil
}

// Key is an API key. Only the SHA-256 of its secret is kept: the secret is
// shown once, when the key is made.
type Key struct {
	ID        string    `json:"id"`
	Account   string    `json:"account"`
	Kind      KeyKind   `json:"kind"`
	Hash      []byte    `json:"hash"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// DailyLimitMicros caps what sandboxes created with the key, and with
	// every key made through it, may cost in a UTC day (0: no limit).
	DailyLimitMicros int64 `json:"daily_limit_micros,omitempty"`
	// Parent is the id of the key that made this one, of the same account.
	// It is empty for keys the admin key made, for the first admin key and
	// for keys stored before parents were recorded: those answer to no
	// other key.
	Parent string `json:"parent,omitempty"`
	// RemovedAt is set on removed keys, which only ListAllKeys returns.
	RemovedAt *time.Time `json:"removed_at,omitempty"`
}

// Account owns sandboxes and keys.
type Account struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Concurrency is how many sandboxes may run at once (0: the server's
	// default).
	Concurrency int `json:"concurrency,omitempty"`
	// TrialSeconds, when above 0, makes this a trial account: its sandboxes
	// may run that many seconds in all, free.
	TrialSeconds int64 `json:"trial_seconds,omitempty"`
}

// UsageDelta is what the meter adds to the ledger for one account and key
// on one UTC day (YYYY-MM-DD).
type UsageDelta struct {
	Day         string `json:"day"`
	Account     string `json:"account"`
	KeyID       string `json:"key_id"`
	AliveMs     int64  `json:"alive_ms"`
	MemoryMiBMs int64  `json:"memory_mib_ms"`
	CPUNs       int64  `json:"cpu_ns"`
	CostNanos   int64  `json:"cost_nanos"`
}

// Empty reports whether the delta adds nothing.
func (d UsageDelta) Empty() bool {
	return d.AliveMs == 0 && d.MemoryMiBMs == 0 && d.CPUNs == 0 && d.CostNanos == 0
}

// UsageRow is the ledger's sum for one day, account and key.
type UsageRow = UsageDelta

// UsageFilter selects ledger rows. Zero fields select everything; From and
// To are days (YYYY-MM-DD), both included.
type UsageFilter struct {
	Account  string
	KeyID    string
	From, To string
}

// Match reports whether a row passes the filter.
func (f UsageFilter) Match(r UsageRow) bool {
	return (f.Account == "" || r.Account == f.Account) &&
		(f.KeyID == "" || r.KeyID == f.KeyID) &&
		(f.From == "" || r.Day >= f.From) &&
		(f.To == "" || r.Day <= f.To)
}

// Secret is an account's secret as it is kept: sealed by the vault
// (internal/secrets), which alone holds the key that opens Ciphertext.
type Secret struct {
	Account    string    `json:"account"`
	Name       string    `json:"name"`
	Host       string    `json:"host"`
	Nonce      []byte    `json:"nonce"`
	Ciphertext []byte    `json:"ciphertext"`
	UpdatedAt  time.Time `json:"updated_at"`
}
