package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Tests of what only a server store does: many processes on one database.
// Two stores opened on one database are two pools, so two processes' worth
// of sessions.

func TestPostgresMigrationsAppliedOnce(t *testing.T) {
	u := freshDatabase(t)
	steps, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	// Servers starting together: each open must succeed, and each step be
	// applied once (a second apply of 0001 fails on its CREATE TABLE).
	const n = 4
	stores := make([]*Postgres, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), pgTestTimeout)
			defer cancel()
			stores[i], errs[i] = OpenPostgres(ctx, u)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d of %d at once: %v", i, n, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	// And a later open finds everything recorded.
	p := openPGURL(t, u)
	rows, err := p.pool.Query(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	var want []string
	for _, m := range steps {
		want = append(want, m.version)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("schema_migrations: got %v, want %v", got, want)
	}
	// The schema works from every store.
	for i, st := range stores {
		if err := st.PutSandbox(t.Context(), &sandbox.Record{ID: fmt.Sprint("s", i), Account: "a", State: sandbox.StateRunning}); err != nil {
			t.Errorf("store %d: PutSandbox: %v", i, err)
		}
	}
}

func TestPostgresTryLockAcrossStores(t *testing.T) {
	a, u := openPGTest(t)
	b := openPGURL(t, u)
	ctx := t.Context()

	unlockA, ok, err := a.TryLock(ctx, "node-detector")
	if err != nil || !ok {
		t.Fatalf("a.TryLock: got %v, %v; want true, nil", ok, err)
	}
	if _, ok, err := b.TryLock(ctx, "node-detector"); err != nil || ok {
		t.Fatalf("b.TryLock while a holds it: got %v, %v; want false, nil", ok, err)
	}
	if _, ok, err := a.TryLock(ctx, "node-detector"); err != nil || ok {
		t.Fatalf("a.TryLock again while a holds it: got %v, %v; want false, nil", ok, err)
	}
	unlockOther, ok, err := b.TryLock(ctx, "other")
	if err != nil || !ok {
		t.Fatalf("b.TryLock of another name: got %v, %v; want true, nil", ok, err)
	}
	defer unlockOther()

	unlockA()
	unlockA() // a second unlock does nothing
	unlockB, ok, err := b.TryLock(ctx, "node-detector")
	if err != nil || !ok {
		t.Fatalf("b.TryLock after a unlocked: got %v, %v; want true, nil", ok, err)
	}
	if _, ok, _ := a.TryLock(ctx, "node-detector"); ok {
		t.Fatal("a.TryLock while b holds it: got true, want false")
	}
	unlockB()
}

func TestPostgresLockReleasedWhenHolderCloses(t *testing.T) {
	u := freshDatabase(t)
	a := openPGURL(t, u)
	b := openPGURL(t, u)
	ctx := t.Context()
	unlockA, ok, err := a.TryLock(ctx, "node-detector")
	if err != nil || !ok {
		t.Fatalf("a.TryLock: got %v, %v; want true, nil", ok, err)
	}
	// Close must not wait for the lock's connection to come back.
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	unlockA() // after Close: does nothing
	// The server releases the lock when it sees the session end, which may
	// be a moment after the client closed it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		unlock, ok, err := b.TryLock(ctx, "node-detector")
		if err != nil {
			t.Fatalf("b.TryLock: %v", err)
		}
		if ok {
			unlock()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b.TryLock: the lock of a closed store is still held")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := a.TryLock(ctx, "x"); err == nil {
		t.Error("TryLock on a closed store: got nil error")
	}
}

func TestPostgresAdmitAcrossStores(t *testing.T) {
	a, u := openPGTest(t)
	b := openPGURL(t, u)
	const limit, tries = 3, 20
	// One live record already: it counts against the limit.
	if err := a.PutSandbox(t.Context(), &sandbox.Record{ID: "old", Account: "acct", State: sandbox.StateRunning, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	// And records of other accounts and ended ones do not.
	for i, r := range []*sandbox.Record{
		{ID: "other", Account: "acct2", State: sandbox.StateRunning},
		{ID: "ended", Account: "acct", State: sandbox.StateEnded},
		{ID: "paused", Account: "acct", State: sandbox.StatePaused},
	} {
		if err := b.PutSandbox(t.Context(), r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	// Connections made beforehand and one start: the admissions overlap
	// instead of queueing behind connection set-up.
	warm(t, a, b)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, tries)
	for i := range tries {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			<-start
			r := &sandbox.Record{ID: fmt.Sprint("sbx", i), Account: "acct", State: sandbox.StateStarting, CreatedAt: t0.Add(time.Duration(i) * time.Second)}
			errs[i] = st.AdmitSandbox(t.Context(), r, limit)
		})
	}
	close(start)
	wg.Wait()
	admitted := 0
	for i, err := range errs {
		switch {
		case err == nil:
			admitted++
		case sandbox.KindOf(err) != sandbox.KindConcurrency:
			t.Errorf("admission %d: got %v, want nil or concurrency_limit_reached", i, err)
		}
	}
	if admitted != limit-1 {
		t.Errorf("admitted %d of %d racing from two stores, want %d (limit %d, one live already)", admitted, tries, limit-1, limit)
	}
	live, err := a.ListSandboxes(t.Context(), SandboxFilter{Account: "acct", States: []sandbox.State{sandbox.StateStarting, sandbox.StateRunning}})
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != limit {
		t.Errorf("live records of acct: got %d, want %d", len(live), limit)
	}
}

// warm fills the stores' pools with connections.
func warm(t *testing.T, stores ...*Postgres) {
	t.Helper()
	for _, p := range stores {
		var conns []*pgxpool.Conn
		for range defaultMaxConns {
			c, err := p.pool.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Release()
		}
	}
}

func TestPostgresURLPasswordNotInErrors(t *testing.T) {
	base, err := url.Parse(testPostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "S3cret-Pw_not-shown"
	wrongPW := *base
	wrongPW.User = url.UserPassword(base.User.Username(), secret)
	noServer := wrongPW
	noServer.Host = "127.0.0.1:1"
	noDB := *base
	noDB.Path = "/no_such_database_here"
	noDBPW, _ := base.User.Password()
	tests := []struct {
		name, url, secret string
	}{
		{"wrong password", wrongPW.String(), secret},
		{"no server", noServer.String(), secret},
		{"no database", noDB.String(), noDBPW},
		{"password in the query", "postgres://127.0.0.1:1/db?user=u&password=" + secret, secret},
		{"does not parse", "postgres://u:" + secret + "@[::1/db", secret},
		{"bad option", "postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=sometimes", secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), pgTestTimeout)
			defer cancel()
			st, err := Open(ctx, tt.url, t.TempDir())
			if err == nil {
				st.Close()
				t.Fatal("Open: got nil error")
			}
			if strings.Contains(err.Error(), tt.secret) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(t.Context(), "", dir)
	if err != nil {
		t.Fatalf("Open(\"\"): %v", err)
	}
	st.Close()
	if _, ok := st.(*Bolt); !ok {
		t.Errorf("Open(\"\"): got %T, want *Bolt", st)
	}
	if _, err := Open(t.Context(), "", ""); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("Open without a data dir: got %v, want invalid_request", err)
	}
	for _, u := range []string{"mysql://root:hunter2@db/x", "hunter2", "bolt:" + filepath.Join(dir, "x.db")} {
		_, err := Open(t.Context(), u, dir)
		if sandbox.KindOf(err) != sandbox.KindInvalid || !strings.Contains(err.Error(), "postgres://") {
			t.Errorf("Open(%q): got %v, want invalid_request naming postgres://", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): the error shows the string: %v", u, err)
		}
	}
	for _, scheme := range []string{"postgres", "postgresql"} {
		base, err := url.Parse(freshDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		base.Scheme = scheme
		st, err := Open(t.Context(), base.String(), dir)
		if err != nil {
			t.Fatalf("Open(%s://...): %v", scheme, err)
		}
		if _, ok := st.(*Postgres); !ok {
			t.Errorf("Open(%s://...): got %T, want *Postgres", scheme, st)
		}
		st.Close()
	}
}

func TestPostgresRefusesWhatItCannotKeep(t *testing.T) {
	p, _ := openPGTest(t)
	r := &sandbox.Record{ID: "sbx", Account: "a", State: sandbox.StateRunning, EndMessage: "nul \x00 byte"}
	err := p.PutSandbox(t.Context(), r)
	if sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Fatalf("PutSandbox with a NUL byte: got %v, want invalid_request", err)
	}
	if r.Version != 0 {
		t.Errorf("version after a refused write: got %d, want 0", r.Version)
	}
	if _, err := p.GetSandbox(t.Context(), "sbx"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("GetSandbox after a refused write: got %v, want not_found", err)
	}
}

// Every store finds nothing under a string PostgreSQL's text cannot hold
// (a request path may carry any bytes): not_found and empty lists, not an
// error of the database.
func TestLookupsOfUnstorableStrings(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := t.Context()
		for _, bad := range []string{"bad\xff", "nul\x00"} {
			for name, err := range map[string]error{
				"GetSandbox":    func() error { _, err := st.GetSandbox(ctx, bad); return err }(),
				"DeleteSandbox": st.DeleteSandbox(ctx, bad),
				"GetAccount":    func() error { _, err := st.GetAccount(ctx, bad); return err }(),
				"DeleteKey":     st.DeleteKey(ctx, bad),
				"GetNode":       func() error { _, err := st.GetNode(ctx, bad); return err }(),
			} {
				if !errors.Is(err, sandbox.ErrNotFound) {
					t.Errorf("%s(%q): got %v, want not_found", name, bad, err)
				}
			}
			recs, err := st.ListSandboxes(ctx, SandboxFilter{Account: bad})
			if err != nil || len(recs) != 0 {
				t.Errorf("ListSandboxes(account %q): got %v, %v; want nothing", bad, recs, err)
			}
			keys, err := st.ListAllKeys(ctx, bad)
			if err != nil || len(keys) != 0 {
				t.Errorf("ListAllKeys(%q): got %v, %v; want nothing", bad, keys, err)
			}
			rows, err := st.Usage(ctx, UsageFilter{KeyID: bad})
			if err != nil || len(rows) != 0 {
				t.Errorf("Usage(key %q): got %v, %v; want nothing", bad, rows, err)
			}
		}
	})
}
