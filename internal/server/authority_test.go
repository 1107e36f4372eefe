package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// TestAuthoritySealKey: the first API server of a store makes the seal
// key into its data dir; another API server opens the authority only with
// a copy of it (file or environment), and is told where to find it
// otherwise; a node's credentials (the store alone) open nothing.
func TestAuthoritySealKey(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	first := t.TempDir()
	a, err := openAuthority(ctx, st, first, true)
	if err != nil {
		t.Fatalf("first API server: %v", err)
	}
	keyFile := filepath.Join(first, "authority.key")
	info, err := os.Stat(keyFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("got %v, %v; want %s of mode 0600", info, err, keyFile)
	}
	raw, _ := os.ReadFile(keyFile)

	// Another API server on an empty data dir: refused, told what to do,
	// and it leaves no key of its own behind.
	second := t.TempDir()
	if _, err := openAuthority(ctx, st, second, true); err == nil || !strings.Contains(err.Error(), "DATA/authority.key") {
		t.Fatalf("second API server without the key: got %v, want it refused naming DATA/authority.key", err)
	}
	if _, err := os.Stat(filepath.Join(second, "authority.key")); !os.IsNotExist(err) {
		t.Fatalf("got %v; want no key left in the refused server's data dir", err)
	}
	// With a copy, in the environment: the same authority.
	t.Setenv(authorityKeyEnv, string(raw))
	b, err := openAuthority(ctx, st, second, true)
	if err != nil {
		t.Fatalf("second API server with the key: %v", err)
	}
	if !b.Certificate().Equal(a.Certificate()) {
		t.Fatal("the second API server opened another authority")
	}
	if _, ok := os.LookupEnv(authorityKeyEnv); ok {
		t.Fatalf("got %s still set, want it removed once read", authorityKeyEnv)
	}
	// A wrong key in the file is refused.
	third := t.TempDir()
	os.WriteFile(filepath.Join(third, "authority.key"), []byte(clusterpki.FormatSealKey(clusterpki.NewSealKey())), 0o600)
	if _, err := openAuthority(ctx, st, third, true); err == nil {
		t.Fatal("a wrong seal key opened the authority")
	}
	// What a node has, the store, opens nothing.
	if _, err := clusterpki.Open(ctx, st, nil); err == nil {
		t.Fatal("the store alone opened the authority")
	}
}

// TestAuthorityKeyFromTheEnvironmentFirst: an installation whose API
// servers all get one WITHRUNTIME_AUTHORITY_KEY (a Kubernetes Secret) and
// no data dir that lasts: the first seals the new authority with that key,
// so every replica opens it, and none writes a key file of its own.
func TestAuthorityKeyFromTheEnvironmentFirst(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	key := clusterpki.FormatSealKey(clusterpki.NewSealKey())
	var first *clusterpki.Authority
	for i, name := range []string{"first replica", "second replica"} {
		dir := t.TempDir()
		t.Setenv(authorityKeyEnv, key+"\n")
		a, err := openAuthority(ctx, st, dir, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if i == 0 {
			first = a
		} else if !a.Certificate().Equal(first.Certificate()) {
			t.Fatalf("%s opened another authority than the first", name)
		}
		if _, err := os.Stat(filepath.Join(dir, "authority.key")); !os.IsNotExist(err) {
			t.Fatalf("%s: got %v, want no authority.key written (the key came from %s)", name, err, authorityKeyEnv)
		}
	}
	// An API server without it (it makes a key of its own) is refused:
	// the authority is sealed with the environment's.
	os.Unsetenv(authorityKeyEnv)
	if _, err := openAuthority(ctx, st, t.TempDir(), true); err == nil {
		t.Fatal("an API server without the environment's key opened the authority")
	}
}

// TestAuthorityKeyMalformed: a value that is no seal key is refused naming
// the variable and the form wanted, and makes nothing: no key file, no
// authority in the store.
func TestAuthorityKeyMalformed(t *testing.T) {
	ctx := context.Background()
	good := clusterpki.FormatSealKey(clusterpki.NewSealKey())
	for _, tc := range []struct{ name, value string }{
		{"empty", ""},
		{"placeholder", "replace-me"},
		{"one digit short", good[1:]},
		{"one byte long", good + "00"},
		{"base64", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := storetest.OpenBolt(t)
			dir := t.TempDir()
			t.Setenv(authorityKeyEnv, tc.value)
			_, err := openAuthority(ctx, st, dir, true)
			if err == nil || !strings.Contains(err.Error(), authorityKeyEnv) || !strings.Contains(err.Error(), "64 hex digits") {
				t.Fatalf("got %v, want an error naming %s and 64 hex digits", err, authorityKeyEnv)
			}
			if _, err := os.Stat(filepath.Join(dir, "authority.key")); !os.IsNotExist(err) {
				t.Fatalf("got %v, want no authority.key written", err)
			}
			// The store is still empty: any key makes the authority.
			if _, err := clusterpki.Open(ctx, st, clusterpki.NewSealKey()); err != nil {
				t.Fatalf("after the refusal, the store holds an authority: %v", err)
			}
		})
	}
}
