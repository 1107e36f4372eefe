package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// eachStore runs f against every Store implementation, each fresh: one
// suite, three stores. Tests of what only a file can do (its mode, its
// lock, reopening it) stay Bolt's own; of what only a server can do,
// Postgres's (pg_test.go).
func eachStore(t *testing.T, f func(t *testing.T, st Store)) {
	t.Helper()
	impls := []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"bolt", func(t *testing.T) Store { b, _ := openTest(t); return b }},
		{"memory", func(t *testing.T) Store { return NewMemory() }},
		{"postgres", func(t *testing.T) Store { p, _ := openPGTest(t); return p }},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) { f(t, impl.open(t)) })
	}
}

// eachStoreReopened is eachStore for tests of what outlives a reopen:
// reopen closes the store and opens it again (Bolt: the same file;
// Postgres: the same database; Memory has nothing to reopen and returns
// itself).
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
	t.Run("memory", func(t *testing.T) {
		m := NewMemory()
		f(t, m, func() Store { return m })
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
// Without one the test is skipped, or fails under CI=true, where nothing
// may be skipped.
func testPostgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("WITHRUNTIME_TEST_POSTGRES")
	if u == "" {
		const how = "scripts/postgres.sh start; export WITHRUNTIME_TEST_POSTGRES=$(scripts/postgres.sh url)"
		if os.Getenv("CI") == "true" {
			t.Fatal("WITHRUNTIME_TEST_POSTGRES is not set, and CI=true skips nothing: " + how)
		}
		t.Skip("WITHRUNTIME_TEST_POSTGRES is not set: " + how)
	}
	return u
}

// pgTestTimeout bounds the test's own statements on the server.
const pgTestTimeout = 30 * time.Second

// freshDatabase makes a database with a random name on the test server,
// through the URL's own database, and returns its URL. It is dropped at
// cleanup, after the stores opened later are closed (cleanups run last
// registered first).
func freshDatabase(t *testing.T) string {
	t.Helper()
	base := testPostgresURL(t)
	var b [8]byte
	rand.Read(b[:])
	name := "withruntime_test_" + hex.EncodeToString(b[:])
	admin := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), pgTestTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin("CREATE DATABASE " + name); err != nil {
		t.Fatalf("making a test database: %v", err)
	}
	t.Cleanup(func() {
		if err := admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("dropping test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

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
