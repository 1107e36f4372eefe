package testenv

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

// postgresHow says how to give tests a PostgreSQL.
const postgresHow = "scripts/postgres.sh start; export WITHRUNTIME_TEST_POSTGRES=$(scripts/postgres.sh url)"

// PostgresURL is the test server's URL (WITHRUNTIME_TEST_POSTGRES, which
// scripts/postgres.sh url prints). Without it the test is skipped, and
// fails under CI=true, where nothing real may be skipped.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("WITHRUNTIME_TEST_POSTGRES")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("WITHRUNTIME_TEST_POSTGRES is not set, and CI=true skips nothing: " + postgresHow)
		}
		t.Skip("WITHRUNTIME_TEST_POSTGRES is not set: " + postgresHow)
	}
	return u
}

// FreshPostgres makes a database named prefix and random hex on the test
// server, through the URL's own database, and returns its URL. It is
// dropped at cleanup, after whatever the test opened on it later is
// closed (cleanups run last registered first).
func FreshPostgres(t testing.TB, prefix string) string {
	t.Helper()
	base := PostgresURL(t)
	var b [8]byte
	rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	admin := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
