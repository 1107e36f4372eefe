package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// nodeColumns are what readNode scans: the entry, then what the columns
// own (the lease's times are the server's clock_timestamp()).
const nodeColumns = "node, epoch, lost, registered_at, renewed_at, lease_ends_at, lease_ends_at <= clock_timestamp()"

func readNode(row pgx.Row) (*Node, error) {
	var data []byte
	var n Node
	var epoch int64
	var lost, expired bool
	var reg, ren, ends time.Time
	if err := row.Scan(&data, &epoch, &lost, &reg, &ren, &ends, &expired); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("decoding node: %w", err)
	}
	n.Epoch, n.Lost, n.Expired = epoch, lost, expired
	n.RegisteredAt, n.RenewedAt, n.LeaseEndsAt = reg.UTC(), ren.UTC(), ends.UTC()
	return &n, nil
}

// RegisterNode stores n as its id's next epoch with a lease of ttl from the
// server's now.
func (p *Postgres) RegisterNode(ctx context.Context, n *Node, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRegister(n, ttl); err != nil {
		return err
	}
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encoding node %s: %w", n.ID, err)
	}
	row := p.pool.QueryRow(ctx, `WITH now AS (SELECT clock_timestamp() AS t)
INSERT INTO nodes AS n (id, epoch, lost, registered_at, renewed_at, lease_ends_at, node)
SELECT $1, 1, false, t, t, t + $2::float8 * interval '1 microsecond', $3 FROM now
ON CONFLICT (id) DO UPDATE SET epoch = n.epoch + 1, lost = false, registered_at = EXCLUDED.registered_at,
    renewed_at = EXCLUDED.renewed_at, lease_ends_at = EXCLUDED.lease_ends_at, node = EXCLUDED.node
RETURNING `+nodeColumns, n.ID, ttl.Microseconds(), data)
	got, err := readNode(row)
	if err != nil {
		return dataError(err, "node "+n.ID)
	}
	*n = *got
	return nil
}

// RenewNode moves the lease of node id's epoch to end ttl from the
// server's now, unless the entry moved to another epoch or was declared
// lost (ErrStale).
func (p *Postgres) RenewNode(ctx context.Context, id string, epoch int64, load NodeLoad, ttl time.Duration) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "node %s: lease must be positive, not %s", id, ttl)
	}
	data, err := json.Marshal(load)
	if err != nil {
		return nil, fmt.Errorf("encoding the load of node %s: %w", id, err)
	}
	row := p.pool.QueryRow(ctx, `WITH now AS (SELECT clock_timestamp() AS t)
UPDATE nodes SET renewed_at = now.t, lease_ends_at = now.t + $3::float8 * interval '1 microsecond',
    node = jsonb_set(node, '{load}', $4::jsonb)
FROM now
WHERE id = $1 AND epoch = $2 AND NOT lost
RETURNING `+nodeColumns, id, epoch, ttl.Microseconds(), data)
	n, err := readNode(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("node %s is not registered at epoch %d or was declared lost: %w", id, epoch, ErrStale)
	}
	if err != nil {
		return nil, dataError(err, "node "+id)
	}
	return n, nil
}

// GetNode returns node id's entry.
func (p *Postgres) GetNode(ctx context.Context, id string) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storable(id) {
		return nil, nodeNotFound(id)
	}
	n, err := readNode(p.pool.QueryRow(ctx, "SELECT "+nodeColumns+" FROM nodes WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nodeNotFound(id)
	}
	if err != nil {
		return nil, dataError(err, "the node id")
	}
	return n, nil
}

// ListNodes returns every node's entry, by id.
func (p *Postgres) ListNodes(ctx context.Context) ([]Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, "SELECT "+nodeColumns+" FROM nodes ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		n, err := readNode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *n)
	}
	return out, rows.Err()
}

// MarkNodeLost declares node id's epoch lost once its lease has ended by
// the server's clock; of racing callers, one is told it did.
func (p *Postgres) MarkNodeLost(ctx context.Context, id string, epoch int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var marked, exists bool
	err := p.pool.QueryRow(ctx, `WITH marked AS (
    UPDATE nodes SET lost = true
    WHERE id = $1 AND epoch = $2 AND NOT lost AND lease_ends_at <= clock_timestamp()
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM marked), EXISTS (SELECT 1 FROM nodes WHERE id = $1)`, id, epoch).Scan(&marked, &exists)
	if err != nil {
		return false, dataError(err, "the node id")
	}
	if !exists {
		return false, nodeNotFound(id)
	}
	return marked, nil
}

// SetNodeCert sets the certificate of node id's epoch for csr, in one
// conditional statement.
func (p *Postgres) SetNodeCert(ctx context.Context, id string, epoch int64, csr, cert string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(id) || csr == "" {
		return fmt.Errorf("node %s asks for another certificate: %w", id, ErrStale)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE nodes SET node = jsonb_set(node, '{cert}', to_jsonb($4::text))
WHERE id = $1 AND epoch = $2 AND NOT lost AND node->>'csr' = $3`, id, epoch, csr, cert)
	if err != nil {
		return dataError(err, "node "+id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("node %s is not at epoch %d, was declared lost or asks for another certificate: %w", id, epoch, ErrStale)
	}
	return nil
}

// InitValue stores value under name unless one is there, and returns the
// stored one: of processes racing, every one gets the first's.
func (p *Postgres) InitValue(ctx context.Context, name string, value []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkValue(name, value); err != nil {
		return nil, err
	}
	if _, err := p.pool.Exec(ctx, "INSERT INTO store_values (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", name, value); err != nil {
		return nil, dataError(err, "value "+name)
	}
	var out []byte
	if err := p.pool.QueryRow(ctx, "SELECT value FROM store_values WHERE name = $1", name).Scan(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// pgLock is a TryLock lock: a session advisory lock on a connection kept
// out of the pool until unlock.
type pgLock struct {
	conn *pgxpool.Conn
	key  int64
}

// destroy ends the lock's session, which releases the lock on the server.
func (l *pgLock) destroy() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	l.conn.Hijack().Close(ctx)
}

// TryLock takes the installation-wide lock name unless another session
// holds it. Two TryLocks of one name in one process are two sessions, so
// the second fails as it would in another process.
func (p *Postgres) TryLock(ctx context.Context, name string) (func(), bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	l := &pgLock{conn: conn, key: lockKey("lock:" + name)}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&ok); err != nil {
		// Whether the lock was taken is unknown: the session goes.
		l.destroy()
		return nil, false, err
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.destroy()
		return nil, false, errors.New("the store is closed")
	}
	p.held[l] = true
	p.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { p.unlock(l) }) }, true, nil
}

// unlock releases l and returns its connection to the pool; a connection
// that fails to unlock is closed instead, which releases the lock too.
func (p *Postgres) unlock(l *pgLock) {
	p.mu.Lock()
	mine := p.held[l]
	delete(p.held, l)
	p.mu.Unlock()
	if !mine {
		return // Close ended it
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", l.key); err != nil {
		l.destroy()
		return
	}
	l.conn.Release()
}

// PutSecret inserts or replaces s.
func (p *Postgres) PutSecret(ctx context.Context, s Secret) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSecretID(s.Account, s.Name); err != nil {
		return err
	}
	if len(s.Nonce) == 0 || len(s.Ciphertext) == 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "secret %s needs a nonce and a ciphertext", s.Name)
	}
	v, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding secret %s: %w", s.Name, err)
	}
	_, err = p.pool.Exec(ctx, `INSERT INTO secrets (account, name, secret) VALUES ($1, $2, $3)
ON CONFLICT (account, name) DO UPDATE SET secret = EXCLUDED.secret`, s.Account, s.Name, v)
	return dataError(err, "secret "+s.Name)
}

// ListSecrets returns the secrets of account, by name.
func (p *Postgres) ListSecrets(ctx context.Context, account string) ([]Secret, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if account == "" || strings.IndexByte(account, 0) >= 0 {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "listing secrets needs an account without NUL bytes")
	}
	if !storable(account) {
		return nil, nil
	}
	rows, err := p.pool.Query(ctx, "SELECT name, secret FROM secrets WHERE account = $1 ORDER BY name", account)
	if err != nil {
		return nil, dataError(err, "the account")
	}
	defer rows.Close()
	var out []Secret
	for rows.Next() {
		var name string
		var data []byte
		if err := rows.Scan(&name, &data); err != nil {
			return nil, err
		}
		s, err := decode[Secret]("secret", name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	return out, rows.Err()
}

// DeleteSecret removes the secret name of account.
func (p *Postgres) DeleteSecret(ctx context.Context, account, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSecretID(account, name); err != nil {
		return err
	}
	if !storable(account, name) {
		return sandbox.Errorf(sandbox.KindNotFound, "secret %s not found", name)
	}
	tag, err := p.pool.Exec(ctx, "DELETE FROM secrets WHERE account = $1 AND name = $2", account, name)
	if err != nil {
		return dataError(err, "secret "+name)
	}
	if tag.RowsAffected() == 0 {
		return sandbox.Errorf(sandbox.KindNotFound, "secret %s not found", name)
	}
	return nil
}
