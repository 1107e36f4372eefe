package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Postgres is the Store of many hosts: one PostgreSQL database that every
// API server and node of an installation opens. Conditional writes and the
// checks of AdmitSandbox, PutKeyIf, DeleteKeyIf and CreateAccount are
// transactions serialised by advisory locks, so they hold across
// processes; TryLock is a session advisory lock.
type Postgres struct {
	pool *pgxpool.Pool
	// events is the EventSource of SetEventSource (nil: none).
	events atomic.Pointer[EventSource]

	mu     sync.Mutex
	held   map[*pgLock]bool // TryLock locks not yet unlocked
	closed bool
}

var _ Store = (*Postgres)(nil)

// defaultMaxConns is the pool's size unless the URL sets pool_max_conns:
// every TryLock lock holds a connection for as long as it is held.
const defaultMaxConns = 10

// releaseTimeout bounds the statements run on the way out (unlocking,
// closing a connection), which have no caller's context.
const releaseTimeout = 5 * time.Second

// OpenPostgres connects to the database at rawURL and brings its schema up
// to date. Errors never show the URL's password.
func OpenPostgres(ctx context.Context, rawURL string) (*Postgres, error) {
	p, err := openPostgres(ctx, rawURL)
	if err != nil {
		return nil, redactError(err, rawURL)
	}
	return p, nil
}

func openPostgres(ctx context.Context, rawURL string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindInvalid, err, "the PostgreSQL URL does not parse")
	}
	if !strings.Contains(rawURL, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening PostgreSQL %s: %w", redactURL(rawURL), err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL %s: %w", redactURL(rawURL), err)
	}
	return &Postgres{pool: pool, held: map[*pgLock]bool{}}, nil
}

// Close ends the connections, those of held locks too (which releases
// them, as a process's death would).
func (p *Postgres) Close() error {
	p.mu.Lock()
	p.closed = true
	held := p.held
	p.held = map[*pgLock]bool{}
	p.mu.Unlock()
	for l := range held {
		l.destroy()
	}
	p.pool.Close()
	return nil
}

// querier is what a pool and a transaction both run statements with.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inTx runs fn in a transaction that commits when fn returns nil.
func (p *Postgres) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{}, fn)
}

// lockKey is the advisory lock key of name: a hash, so that any name maps
// into PostgreSQL's one bigint space. Callers prefix names by what they
// lock ("lock:", "account:", ...), so that the spaces do not meet.
func lockKey(name string) int64 {
	h := sha256.Sum256([]byte("withruntime:" + name))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// xactLock takes the transaction-scoped advisory lock of name in tx: it is
// held until tx ends, and every transaction that takes it runs after.
func xactLock(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(name))
	return err
}

// PostgreSQL error codes the store turns into kinds.
const (
	pgUniqueViolation   = "23505"
	pgUntranslatable    = "22P05" // \u0000 in JSONB
	pgNotInRepertoire   = "22021" // a NUL byte or invalid UTF-8 in text
	pgProgramLimit      = "54000" // a value too large to keep
	pgStringDataTooLong = "22001"
)

func pgCode(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// dataError turns PostgreSQL's refusals of a value (NUL bytes, which text
// and JSONB cannot hold; invalid UTF-8; sizes) into invalid_request errors
// about what: the embedded store keeps such values, this one cannot.
func dataError(err error, what string) error {
	switch pgCode(err) {
	case pgUntranslatable, pgNotInRepertoire, pgProgramLimit, pgStringDataTooLong:
		return sandbox.Wrap(sandbox.KindInvalid, err, what+" holds characters or sizes the store cannot keep")
	}
	return err
}

// storable reports whether PostgreSQL's text can hold s (no NUL byte,
// valid UTF-8). A lookup of a string it cannot hold finds nothing, as in
// the embedded store, instead of failing.
func storable(s ...string) bool {
	for _, v := range s {
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return false
		}
	}
	return true
}

// redactURL is rawURL without its password, for messages; a URL that does
// not parse is not shown at all.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// redactError is err with every form of rawURL's password in its message
// replaced, whatever layer put it there. It still unwraps to err, so kinds
// and sentinels match.
func redactError(err error, rawURL string) error {
	var secrets []string
	if u, perr := url.Parse(rawURL); perr == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			secrets = append(secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
			if i := strings.Index(u.User.String(), ":"); i >= 0 {
				secrets = append(secrets, u.User.String()[i+1:])
			}
		}
		if pw := u.Query().Get("password"); pw != "" {
			secrets = append(secrets, pw, url.QueryEscape(pw))
		}
	} else {
		// The whole string may be a secret; no part of it is shown.
		secrets = append(secrets, rawURL)
	}
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// decode reads a JSON value of the database (a column of jsonb) into a new T.
func decode[T any](kind, id string, data []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", kind, id, err)
	}
	return v, nil
}
