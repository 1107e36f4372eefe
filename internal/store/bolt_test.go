package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// t0 is a fixed instant in UTC, so records compare equal after a JSON round
// trip.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func openTest(t *testing.T) (*Bolt, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "withruntime.db")
	b, err := OpenBolt(path)
	if err != nil {
		t.Fatalf("OpenBolt: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b, path
}

func record(id, account string, state sandbox.State, created time.Time) *sandbox.Record {
	started := created.Add(time.Second)
	return &sandbox.Record{
		ID:      id,
		Account: account,
		Backend: "gvisor",
		Spec: sandbox.Spec{
			Image:      "debian",
			VCPUs:      2,
			MemoryMiB:  4096,
			Timeout:    5 * time.Minute,
			OnLeaseEnd: sandbox.OnLeaseEndStop,
			Env:        map[string]string{"A": "b"},
			Metadata:   map[string]string{"task": "x"},
		},
		State:       state,
		CreatedAt:   created,
		StartedAt:   &started,
		LeaseEndsAt: created.Add(5 * time.Minute),
	}
}

func hashOf(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func TestOpenBoltFileMode(t *testing.T) {
	_, path := openTest(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode().Perm(), os.FileMode(0o600); got != want {
		t.Errorf("mode: got %v, want %v", got, want)
	}
}

func TestOpenBoltLocked(t *testing.T) {
	_, path := openTest(t)
	start := time.Now()
	b2, err := OpenBolt(path)
	if err == nil {
		b2.Close()
		t.Fatal("second OpenBolt on the same file: got nil error, want a lock error")
	}
	if !strings.Contains(err.Error(), "another") {
		t.Errorf("error %q does not say another process holds the file", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second open took %v, want about %v", d, lockTimeout)
	}
}

func TestSandboxRoundTrip(t *testing.T) {
	eachStore(t, func(t *testing.T, b Store) {
		ctx := t.Context()
		want := record("sbx-1", "acct", sandbox.StateRunning, t0)
		if err := b.PutSandbox(ctx, want); err != nil {
			t.Fatalf("PutSandbox: %v", err)
		}
		got, err := b.GetSandbox(ctx, "sbx-1")
		if err != nil {
			t.Fatalf("GetSandbox: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}

		// Replace.
		ended := t0.Add(time.Hour)
		want.State, want.EndedAt, want.EndReason = sandbox.StateEnded, &ended, sandbox.EndLeaseEnded
		if err := b.PutSandbox(ctx, want); err != nil {
			t.Fatalf("PutSandbox (replace): %v", err)
		}
		got, err = b.GetSandbox(ctx, "sbx-1")
		if err != nil {
			t.Fatalf("GetSandbox: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after replace: got %+v, want %+v", got, want)
		}

		if err := b.DeleteSandbox(ctx, "sbx-1"); err != nil {
			t.Fatalf("DeleteSandbox: %v", err)
		}
		if _, err := b.GetSandbox(ctx, "sbx-1"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("GetSandbox after delete: got %v, want not_found", err)
		}
	})
}

func TestNotFound(t *testing.T) {
	eachStore(t, func(t *testing.T, b Store) {
		ctx := t.Context()
		tests := []struct {
			name    string
			call    func() error
			message string
		}{
			{"GetSandbox", func() error { _, err := b.GetSandbox(ctx, "nope"); return err }, "sandbox nope not found"},
			{"DeleteSandbox", func() error { return b.DeleteSandbox(ctx, "nope") }, "sandbox nope not found"},
			{"KeyByHash", func() error { _, err := b.KeyByHash(ctx, hashOf("nope")); return err }, "key not found"},
			{"KeyByHash empty", func() error { _, err := b.KeyByHash(ctx, nil); return err }, "key not found"},
			{"DeleteKey", func() error { return b.DeleteKey(ctx, "nope") }, "key nope not found"},
			{"GetAccount", func() error { _, err := b.GetAccount(ctx, "nope"); return err }, "account nope not found"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.call()
				if got, want := sandbox.KindOf(err), sandbox.KindNotFound; got != want {
					t.Errorf("kind: got %q (%v), want %q", got, err, want)
				}
				if got := sandbox.MessageOf(err); got != tt.message {
					t.Errorf("message: got %q, want %q", got, tt.message)
				}
			})
		}
	})
}

func TestInvalidInput(t *testing.T) {
	eachStore(t, func(t *testing.T, b Store) {
		ctx := t.Context()
		tests := []struct {
			name string
			call func() error
		}{
			{"sandbox without id", func() error { return b.PutSandbox(ctx, &sandbox.Record{}) }},
			{"nil sandbox", func() error { return b.PutSandbox(ctx, nil) }},
			{"key without id", func() error { return b.PutKey(ctx, Key{Account: "a", Kind: KeyFull, Hash: hashOf("s")}) }},
			{"key without account", func() error { return b.PutKey(ctx, Key{ID: "k", Kind: KeyFull, Hash: hashOf("s")}) }},
			{"key of unknown kind", func() error { return b.PutKey(ctx, Key{ID: "k", Account: "a", Kind: "root", Hash: hashOf("s")}) }},
			{"key with short hash", func() error { return b.PutKey(ctx, Key{ID: "k", Account: "a", Kind: KeyFull, Hash: []byte("s")}) }},
			{"account without id", func() error { return b.PutAccount(ctx, Account{Name: "x"}) }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if got, want := sandbox.KindOf(tt.call()), sandbox.KindInvalid; got != want {
					t.Errorf("got kind %q, want %q", got, want)
				}
			})
		}
	})
}

func TestListSandboxesFilter(t *testing.T) {
	eachStore(t, func(t *testing.T, b Store) {
		ctx := t.Context()
		// Put out of order: the list must come back sorted by CreatedAt.
		recs := []*sandbox.Record{
			record("c", "acct1", sandbox.StateEnded, t0.Add(3*time.Minute)),
			record("a", "acct1", sandbox.StateRunning, t0.Add(1*time.Minute)),
			record("d", "acct2", sandbox.StateRunning, t0.Add(4*time.Minute)),
			record("b", "acct1", sandbox.StatePaused, t0.Add(2*time.Minute)),
			record("e", "acct2", sandbox.StateStarting, t0.Add(2*time.Minute)),
		}
		for _, r := range recs {
			if err := b.PutSandbox(ctx, r); err != nil {
				t.Fatalf("PutSandbox %s: %v", r.ID, err)
			}
		}
		tests := []struct {
			name   string
			filter SandboxFilter
			want   []string
		}{
			{"all", SandboxFilter{}, []string{"a", "b", "e", "c", "d"}},
			{"account", SandboxFilter{Account: "acct1"}, []string{"a", "b", "c"}},
			{"state", SandboxFilter{States: []sandbox.State{sandbox.StateRunning}}, []string{"a", "d"}},
			{"live", SandboxFilter{States: []sandbox.State{sandbox.StateStarting, sandbox.StateRunning}}, []string{"a", "e", "d"}},
			{"account and state", SandboxFilter{Account: "acct2", States: []sandbox.State{sandbox.StateRunning}}, []string{"d"}},
			{"no match", SandboxFilter{Account: "acct3"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := b.ListSandboxes(ctx, tt.filter)
				if err != nil {
					t.Fatalf("ListSandboxes: %v", err)
				}
				var ids []string
				for _, r := range got {
					ids = append(ids, r.ID)
				}
				if !reflect.DeepEqual(ids, tt.want) {
					t.Errorf("got %v, want %v", ids, tt.want)
				}
			})
		}
	})
}

func TestKeys(t *testing.T) {
	eachStore(t, func(t *testing.T, b Store) {
		ctx := t.Context()
		keys := []Key{
			{ID: "k2", Account: "acct1", Kind: KeyReadOnly, Hash: hashOf("secret2"), Name: "ci", CreatedAt: t0.Add(time.Minute)},
			{ID: "k1", Account: "acct1", Kind: KeyFull, Hash: hashOf("secret1"), CreatedAt: t0},
			{ID: "k3", Account: "admin", Kind: KeyAdmin, Hash: hashOf("secret3"), CreatedAt: t0.Add(2 * time.Minute)},
		}
		for _, k := range keys {
			if err := b.PutKey(ctx, k); err != nil {
				t.Fatalf("PutKey %s: %v", k.ID, err)
			}
		}

		got, err := b.KeyByHash(ctx, hashOf("secret2"))
		if err != nil {
			t.Fatalf("KeyByHash: %v", err)
		}
		if !reflect.DeepEqual(*got, keys[0]) {
			t.Errorf("KeyByHash: got %+v, want %+v", *got, keys[0])
		}

		for _, tt := range []struct {
			account string
			want    []string
		}{
			{"acct1", []string{"k1", "k2"}},
			{"admin", []string{"k3"}},
			{"", []string{"k1", "k2", "k3"}},
			{"other", nil},
		} {
			list, err := b.ListKeys(ctx, tt.account)
			if err != nil {
				t.Fatalf("ListKeys(%q): %v", tt.account, err)
			}
			var ids []string
			for _, k := range list {
				ids = append(ids, k.ID)
			}
			if !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ListKeys(%q): got %v, want %v", tt.account, ids, tt.want)
			}
		}

		// Another key may not take a secret already in use.
		dup := Key{ID: "k4", Account: "acct2", Kind: KeyFull, Hash: hashOf("secret1"), CreatedAt: t0}
		if err := b.PutKey(ctx, dup); sandbox.KindOf(err) != sandbox.KindConflict {
			t.Errorf("PutKey with a used hash: got %v, want conflict", err)
		}

		// Replacing a key's secret retires the old one.
		rotated := keys[1]
		rotated.Hash = hashOf("secret1-rotated")
		if err := b.PutKey(ctx, rotated); err != nil {
			t.Fatalf("PutKey (rotate): %v", err)
		}
		if _, err := b.KeyByHash(ctx, hashOf("secret1")); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("old secret after rotation: got %v, want not_found", err)
		}
		if got, err := b.KeyByHash(ctx, hashOf("secret1-rotated")); err != nil || got.ID != "k1" {
			t.Errorf("new secret after rotation: got %v, %v, want k1", got, err)
		}

		if err := b.DeleteKey(ctx, "k2"); err != nil {
			t.Fatalf("DeleteKey: %v", err)
		}
		if _, err := b.KeyByHash(ctx, hashOf("secret2")); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("KeyByHash after delete: got %v, want not_found", err)
		}
	})
}

func TestAccounts(t *testing.T) {
	eachStore(t, func(t *testing.T, b Store) {
		ctx := t.Context()
		accts := []Account{
			{ID: "b", Name: "Bee", CreatedAt: t0.Add(time.Minute)},
			{ID: "a", Name: "Ay", CreatedAt: t0},
		}
		for _, a := range accts {
			if err := b.PutAccount(ctx, a); err != nil {
				t.Fatalf("PutAccount %s: %v", a.ID, err)
			}
		}
		got, err := b.GetAccount(ctx, "b")
		if err != nil {
			t.Fatalf("GetAccount: %v", err)
		}
		if !reflect.DeepEqual(*got, accts[0]) {
			t.Errorf("GetAccount: got %+v, want %+v", *got, accts[0])
		}
		list, err := b.ListAccounts(ctx)
		if err != nil {
			t.Fatalf("ListAccounts: %v", err)
		}
		if want := []Account{accts[1], accts[0]}; !reflect.DeepEqual(list, want) {
			t.Errorf("ListAccounts: got %+v, want %+v", list, want)
		}
	})
}

func TestReopenKeepsData(t *testing.T) {
	b, path := openTest(t)
	ctx := t.Context()
	rec := record("sbx-1", "acct", sandbox.StatePaused, t0)
	key := Key{ID: "k1", Account: "acct", Kind: KeyFull, Hash: hashOf("s"), CreatedAt: t0}
	acct := Account{ID: "acct", Name: "A", CreatedAt: t0}
	if err := b.PutSandbox(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := b.PutKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := b.PutAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	b2, err := OpenBolt(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer b2.Close()
	if got, err := b2.GetSandbox(ctx, "sbx-1"); err != nil || !reflect.DeepEqual(got, rec) {
		t.Errorf("sandbox after reopen: got %+v, %v, want %+v", got, err, rec)
	}
	if got, err := b2.KeyByHash(ctx, hashOf("s")); err != nil || !reflect.DeepEqual(*got, key) {
		t.Errorf("key after reopen: got %+v, %v, want %+v", got, err, key)
	}
	if got, err := b2.GetAccount(ctx, "acct"); err != nil || !reflect.DeepEqual(*got, acct) {
		t.Errorf("account after reopen: got %+v, %v, want %+v", got, err, acct)
	}
}

func TestCanceledContext(t *testing.T) {
	eachStore(t, func(t *testing.T, b Store) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := b.GetSandbox(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	})
}
