package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/store"
)

// TestAuthoritySealKey: the first API server of a store makes the seal
// key into its data dir; another API server opens the authority only with
// a copy of it (file or environment), and is told where to find it
// otherwise; a node's credentials (the store alone) open nothing.
func TestAuthoritySealKey(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
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
