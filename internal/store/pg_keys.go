package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// keysLock is the advisory lock every key write takes: checks over an
// account's keys (PutKeyIf, DeleteKeyIf with every key) and the walk of a
// key's descendants (DeleteKey) each see the keys as one writer left them.
// Keys change rarely; one lock for all is cheap.
const keysLock = "keys"

// PutKey inserts or replaces k.
func (p *Postgres) PutKey(ctx context.Context, k Key) error {
	return p.PutKeyIf(ctx, k, nil)
}

// PutKeyIf stores k if check (nil: none) accepts the keys of k's account,
// read in the same transaction.
func (p *Postgres) PutKeyIf(ctx context.Context, k Key, check func(keys []Key) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(k); err != nil {
		return err
	}
	v, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("encoding key %s: %w", k.ID, err)
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		if err := xactLock(ctx, tx, keysLock); err != nil {
			return err
		}
		if check != nil {
			keys, err := listKeys(ctx, tx, k.Account, false)
			if err != nil {
				return err
			}
			if err := check(keys); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO keys (id, account, hash, created_at, key) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET account = EXCLUDED.account, hash = EXCLUDED.hash, created_at = EXCLUDED.created_at, key = EXCLUDED.key`,
			k.ID, k.Account, k.Hash, k.CreatedAt, v)
		if pgCode(err) == pgUniqueViolation {
			return sandbox.Errorf(sandbox.KindConflict, "key %s: another key has the same secret", k.ID)
		}
		return dataError(err, "key "+k.ID)
	})
}

// KeyByHash returns the key whose secret hashes to hash.
func (p *Postgres) KeyByHash(ctx context.Context, hash []byte) (*Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(hash) == 0 {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "key not found")
	}
	var data []byte
	err := p.pool.QueryRow(ctx, "SELECT key FROM keys WHERE hash = $1", hash).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "key not found")
	}
	if err != nil {
		return nil, err
	}
	return decode[Key]("key", "by hash", data)
}

// ListKeys returns the keys of account (every key when it is empty),
// oldest first.
func (p *Postgres) ListKeys(ctx context.Context, account string) ([]Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return listKeys(ctx, p.pool, account, false)
}

// ListAllKeys returns the keys of account, removed ones included, oldest
// first.
func (p *Postgres) ListAllKeys(ctx context.Context, account string) ([]Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return listKeys(ctx, p.pool, account, true)
}

func listKeys(ctx context.Context, q querier, account string, removed bool) ([]Key, error) {
	if !storable(account) {
		return nil, nil
	}
	sql := "SELECT id, key FROM keys WHERE $1 = '' OR account = $1"
	if removed {
		sql += " UNION ALL SELECT id, key FROM removed_keys WHERE $1 = '' OR account = $1"
	}
	rows, err := q.Query(ctx, sql, account)
	if err != nil {
		return nil, dataError(err, "the account")
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, err
		}
		k, err := decode[Key]("key", id, data)
		if err != nil {
			return nil, err
		}
		out = append(out, *k)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sortKeys(out)
	return out, nil
}

// DeleteKey removes the key with id and every key made through it, in one
// transaction, keeping each without its hash as a removed key.
func (p *Postgres) DeleteKey(ctx context.Context, id string) error {
	return p.DeleteKeyIf(ctx, id, "", nil)
}

// DeleteKeyIf is DeleteKey once check (nil: none) accepts the keys of
// account (every key when it is ""), read in the same transaction.
func (p *Postgres) DeleteKeyIf(ctx context.Context, id, account string, check func(keys []Key) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		if err := xactLock(ctx, tx, keysLock); err != nil {
			return err
		}
		if check != nil {
			keys, err := listKeys(ctx, tx, account, false)
			if err != nil {
				return err
			}
			if err := check(keys); err != nil {
				return err
			}
		}
		if !storable(id) {
			return sandbox.Errorf(sandbox.KindNotFound, "key %s not found", id)
		}
		var owner string
		err := tx.QueryRow(ctx, "SELECT account FROM keys WHERE id = $1", id).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) {
			return sandbox.Errorf(sandbox.KindNotFound, "key %s not found", id)
		}
		if err != nil {
			return dataError(err, "the key id")
		}
		// A key's descendants are of its account.
		family, err := listKeys(ctx, tx, owner, false)
		if err != nil {
			return err
		}
		tree := NewKeyTree(family)
		now := time.Now().UTC()
		ids := tree.Subtree(id)
		for _, kid := range ids {
			k, _ := tree.Key(kid)
			k.Hash, k.RemovedAt = nil, &now
			v, err := json.Marshal(k)
			if err != nil {
				return fmt.Errorf("encoding key %s: %w", kid, err)
			}
			_, err = tx.Exec(ctx, `INSERT INTO removed_keys (id, account, created_at, key) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET account = EXCLUDED.account, created_at = EXCLUDED.created_at, key = EXCLUDED.key`,
				k.ID, k.Account, k.CreatedAt, v)
			if err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, "DELETE FROM keys WHERE id = ANY($1)", ids)
		return err
	})
}

// accountsLock orders account creations: the id and name checks read
// after it is taken (the unique indexes hold against any other writer).
const accountsLock = "accounts"

// PutAccount inserts or replaces a.
func (p *Postgres) PutAccount(ctx context.Context, a Account) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "account needs an id")
	}
	return p.writeAccount(ctx, p.pool, a, true)
}

// CreateAccount inserts a unless an account with its id or name exists, in
// one transaction.
func (p *Postgres) CreateAccount(ctx context.Context, a Account) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "account needs an id")
	}
	return p.inTx(ctx, func(tx pgx.Tx) error {
		if err := xactLock(ctx, tx, accountsLock); err != nil {
			return err
		}
		var idTaken, nameTaken bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1),
    $2 <> '' AND EXISTS (SELECT 1 FROM accounts WHERE name = $2)`, a.ID, a.Name).Scan(&idTaken, &nameTaken)
		switch {
		case err != nil:
			return dataError(err, "account "+a.ID)
		case idTaken:
			return sandbox.Errorf(sandbox.KindConflict, "account %s already exists", a.ID)
		case nameTaken:
			return sandbox.Errorf(sandbox.KindConflict, "an account named %s already exists", a.Name)
		}
		return p.writeAccount(ctx, tx, a, false)
	})
}

// writeAccount stores a, replacing the account with its id when replace.
func (p *Postgres) writeAccount(ctx context.Context, q querier, a Account, replace bool) error {
	v, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encoding account %s: %w", a.ID, err)
	}
	var name any // NULL for no name: many accounts may have none
	if a.Name != "" {
		name = a.Name
	}
	sql := "INSERT INTO accounts (id, name, created_at, account) VALUES ($1, $2, $3, $4)"
	if replace {
		sql += " ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, created_at = EXCLUDED.created_at, account = EXCLUDED.account"
	}
	_, err = q.Exec(ctx, sql, a.ID, name, a.CreatedAt, v)
	if pgCode(err) == pgUniqueViolation {
		return sandbox.Errorf(sandbox.KindConflict, "an account named %s already exists", a.Name)
	}
	return dataError(err, "account "+a.ID)
}

// GetAccount returns the account with id.
func (p *Postgres) GetAccount(ctx context.Context, id string) (*Account, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storable(id) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "account %s not found", id)
	}
	var data []byte
	err := p.pool.QueryRow(ctx, "SELECT account FROM accounts WHERE id = $1", id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "account %s not found", id)
	}
	if err != nil {
		return nil, dataError(err, "the account id")
	}
	return decode[Account]("account", id, data)
}

// ListAccounts returns every account, oldest first.
func (p *Postgres) ListAccounts(ctx context.Context) ([]Account, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, "SELECT id, account FROM accounts")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Account
	for rows.Next() {
		var id string
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return nil, err
		}
		a, err := decode[Account]("account", id, data)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(x, y Account) int {
		if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return out, nil
}
