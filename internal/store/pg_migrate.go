package store

import (
	"context"
	"embed"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the PostgreSQL schema's steps, NNNN_name.sql, applied in
// order and once each. A step is never edited once released: a change is a
// new step.
//
//go:embed migrations/*.sql
var migrations embed.FS

var migrationName = regexp.MustCompile(`^[0-9]{4}_[a-z0-9_]+\.sql$`)

type migration struct {
	version string // the file name without .sql
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		if !migrationName.MatchString(e.Name()) {
			return nil, fmt.Errorf("migration %s: want a name NNNN_name.sql", e.Name())
		}
		data, err := migrations.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: strings.TrimSuffix(e.Name(), ".sql"), sql: string(data)})
	}
	slices.SortFunc(out, func(a, b migration) int { return strings.Compare(a.version, b.version) })
	return out, nil
}

// migrate applies the steps the database has not recorded, each in its own
// transaction with its record in schema_migrations. It holds a session
// advisory lock meanwhile, so that servers starting together apply each
// step once: the others wait, then find it recorded.
func migrate(ctx context.Context, pool *pgxpool.Pool) (err error) {
	steps, err := loadMigrations()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	key := lockKey("migrations")
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		conn.Release()
		return fmt.Errorf("waiting for the migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if _, uerr := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", key); uerr != nil {
			// Ending the session is what releases the lock now.
			conn.Hijack().Close(uctx)
			return
		}
		conn.Release()
	}()
	_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text COLLATE "C" PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)`)
	if err != nil {
		return fmt.Errorf("making schema_migrations: %w", err)
	}
	for _, m := range steps {
		err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{}, func(tx pgx.Tx) error {
			var done bool
			err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)", m.version).Scan(&done)
			if err != nil || done {
				return err
			}
			// No arguments: the simple protocol, which runs many statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.version)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.version, err)
		}
	}
	return nil
}
