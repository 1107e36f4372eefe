package membudget

import (
	"errors"
	"fmt"
	"sync"
)

// Defaults of New: the server's total; an account gets a quarter of it, a
// sandbox an eighth.
const (
	DefaultTotal = 1 << 30
	// MaxAccountShare is the largest fraction of the total one account
	// may hold: 1/MaxAccountShare.
	MaxAccountShare = 4
)

// Level names the bound a reservation ran into.
type Level string

const (
	LevelSandbox Level = "sandbox"
	LevelAccount Level = "account"
	LevelServer  Level = "server"
)

// Sentinels for errors.Is: a reservation past a sandbox's or an account's
// share (the caller's own: rate_limited, 429) or past the server's total
// (everyone's: capacity_exhausted, 503).
var (
	ErrShare    = errors.New("memory share exhausted")
	ErrCapacity = errors.New("server memory budget exhausted")
)

// Error is a refused reservation.
type Error struct {
	Level Level
	Want  int64 // bytes asked for
	Limit int64 // the level's bound
}

func (e *Error) Error() string {
	return fmt.Sprintf("the %s's budget for answers of sandboxes in progress (%d MiB) is spent", e.Level, e.Limit>>20)
}

// Unwrap is ErrShare for a sandbox's or an account's bound, ErrCapacity
// for the server's.
func (e *Error) Unwrap() error {
	if e.Level == LevelServer {
		return ErrCapacity
	}
	return ErrShare
}

// Limits are a Budget's bounds in bytes.
type Limits struct {
	Total, Account, Sandbox int64
}

// Validate reports a bound that is not positive, a share larger than the
// total's quarter, or a sandbox's larger than its account's.
func (l Limits) Validate() error {
	switch {
	case l.Total <= 0 || l.Account <= 0 || l.Sandbox <= 0:
		return errors.New("membudget: every bound must be positive")
	case l.Account > l.Total/MaxAccountShare:
		return fmt.Errorf("membudget: an account's share (%d) is more than 1/%d of the total (%d)", l.Account, MaxAccountShare, l.Total)
	case l.Sandbox > l.Account:
		return fmt.Errorf("membudget: a sandbox's share (%d) is more than its account's (%d)", l.Sandbox, l.Account)
	}
	return nil
}

// LimitsFor are the limits of a total: an account gets a quarter of it,
// a sandbox an eighth.
func LimitsFor(total int64) Limits {
	return Limits{Total: total, Account: total / MaxAccountShare, Sandbox: total / (2 * MaxAccountShare)}
}

// Budget counts the bytes reserved by account and sandbox. A nil *Budget
// reserves without bound. It is safe for concurrent use.
type Budget struct {
	lim Limits

	mu        sync.Mutex // guards the counts below
	used      int64
	byAccount map[string]int64
	bySandbox map[sandboxKey]int64
}

type sandboxKey struct{ account, sandbox string }

// New makes a Budget of LimitsFor(total).
func New(total int64) *Budget {
	b, err := NewWith(LimitsFor(total))
	if err != nil {
		panic(err) // LimitsFor is valid for any total of at least 8 bytes
	}
	return b
}

// NewWith makes a Budget of l.
func NewWith(l Limits) (*Budget, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Budget{lim: l, byAccount: map[string]int64{}, bySandbox: map[sandboxKey]int64{}}, nil
}

// Limits returns b's bounds.
func (b *Budget) Limits() Limits { return b.lim }

// Used returns the bytes reserved on the server, by account and by
// sandbox of account.
func (b *Budget) Used(account, sandbox string) (server, byAccount, bySandbox int64) {
	if b == nil {
		return 0, 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.byAccount[account], b.bySandbox[sandboxKey{account, sandbox}]
}

// Acquire reserves n bytes for sandbox of account ("" when the bytes
// belong to no one sandbox: only the account's and server's bounds
// apply), or refuses with an *Error. release gives them back; calling it
// more than once gives them back once.
func (b *Budget) Acquire(account, sandbox string, n int64) (release func(), err error) {
	if b == nil || n <= 0 {
		return func() {}, nil
	}
	if err := b.add(account, sandbox, n); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { b.sub(account, sandbox, n) }) }, nil
}

// add reserves n more bytes (n > 0) or refuses.
func (b *Budget) add(account, sandbox string, n int64) error {
	k := sandboxKey{account, sandbox}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case sandbox != "" && b.bySandbox[k]+n > b.lim.Sandbox:
		return &Error{Level: LevelSandbox, Want: n, Limit: b.lim.Sandbox}
	case b.byAccount[account]+n > b.lim.Account:
		return &Error{Level: LevelAccount, Want: n, Limit: b.lim.Account}
	case b.used+n > b.lim.Total:
		return &Error{Level: LevelServer, Want: n, Limit: b.lim.Total}
	}
	b.used += n
	b.byAccount[account] += n
	if sandbox != "" {
		b.bySandbox[k] += n
	}
	return nil
}

// sub gives back n bytes (n > 0), forgetting counts that reach zero.
func (b *Budget) sub(account, sandbox string, n int64) {
	k := sandboxKey{account, sandbox}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.byAccount[account] -= n; b.byAccount[account] <= 0 {
		delete(b.byAccount, account)
	}
	if sandbox != "" {
		if b.bySandbox[k] -= n; b.bySandbox[k] <= 0 {
			delete(b.bySandbox, k)
		}
	}
}

// Hold is a reservation that grows and shrinks with a buffer: a stream's
// line as it is read, released when the line is done. A Hold of a nil
// Budget reserves nothing. It is safe for concurrent use.
type Hold struct {
	b                *Budget
	account, sandbox string

	mu sync.Mutex // guards n
	n  int64
}

// Hold returns an empty reservation for sandbox of account.
func (b *Budget) Hold(account, sandbox string) *Hold {
	return &Hold{b: b, account: account, sandbox: sandbox}
}

// Resize makes the reservation n bytes: growing it may be refused (an
// *Error; it then stays as it was), shrinking never is.
func (h *Hold) Resize(n int64) error {
	if h == nil || h.b == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n = max(n, 0)
	switch {
	case n > h.n:
		if err := h.b.add(h.account, h.sandbox, n-h.n); err != nil {
			return err
		}
	case n < h.n:
		h.b.sub(h.account, h.sandbox, h.n-n)
	}
	h.n = n
	return nil
}

// Held is the reservation's size.
func (h *Hold) Held() int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Release gives the whole reservation back.
func (h *Hold) Release() { h.Resize(0) }
