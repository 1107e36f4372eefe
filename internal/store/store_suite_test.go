package store

import (
	"context"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// eachStore runs f against every Store implementation, each fresh: one
// suite, both stores. Tests of what only a file can do (its mode, its
// lock, reopening it) stay Bolt's own; of what only a server can do,
// Postgres's (pg_test.go).
func eachStore(t *testing.T, f func(t *testing.T, st Store)) {
	t.Helper()
	impls := []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"bolt", func(t *testing.T) Store { b, _ := openTest(t); return b }},
		{"postgres", func(t *testing.T) Store { p, _ := openPGTest(t); return p }},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) { f(t, impl.open(t)) })
	}
}

// eachStoreReopened is eachStore for tests of what outlives a reopen:
// reopen closes the store and opens it again (Bolt: the same file;
// Postgres: the same database).
func eachStoreReopened(t *testing.T, f func(t *testing.T, st Store, reopen func() Store)) {
	t.Helper()
	t.Run("bolt", func(t *testing.T) {
		b, path := openTest(t)
		f(t, b, func() Store {
			b.Close()
			b2, err := OpenBolt(path)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			t.Cleanup(func() { b2.Close() })
			return b2
		})
	})
	t.Run("postgres", func(t *testing.T) {
		p, u := openPGTest(t)
		f(t, p, func() Store {
			p.Close()
			return openPGURL(t, u)
		})
	})
}

// testPostgresURL is the test server's URL (scripts/postgres.sh url).
func testPostgresURL(t *testing.T) string { return testenv.PostgresURL(t) }

// pgTestTimeout bounds the test's own statements on the server.
const pgTestTimeout = 30 * time.Second

// freshDatabase makes a database of its own on the test server, dropped
// at cleanup, and returns its URL.
func freshDatabase(t *testing.T) string { return testenv.FreshPostgres(t, "withruntime_test_") }

// openPGURL opens a store on the database at u, closed at cleanup.
func openPGURL(t *testing.T, u string) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pgTestTimeout)
	defer cancel()
	p, err := OpenPostgres(ctx, u)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// openPGTest opens a store on a fresh database and returns it and the
// database's URL.
func openPGTest(t *testing.T) (*Postgres, string) {
	t.Helper()
	u := freshDatabase(t)
	return openPGURL(t, u), u
}
