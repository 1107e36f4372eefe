package server

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// TestClusterAdminKeyOncePerInstallation: of the API servers of one store,
// only the first start makes an admin key, and no later start makes one
// again, also not after the operator replaced it.
func TestClusterAdminKeyOncePerInstallation(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	dirA, dirB, dirC := t.TempDir(), t.TempDir(), t.TempDir()

	key, made, err := clusterAdminKey(ctx, st, dirA)
	if err != nil || !made || key == "" {
		t.Fatalf("first start: got %q, %v, %v; want a new key", key, made, err)
	}
	fi, err := os.Stat(filepath.Join(dirA, "admin.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.key: %v, %v; want mode 0600", fi, err)
	}
	sum := sha256.Sum256([]byte(key))
	if k, err := st.KeyByHash(ctx, sum[:]); err != nil || k.Kind != store.KeyAdmin {
		t.Fatalf("the key is not the store's admin key: %v, %v", k, err)
	}
	if again, made, err := clusterAdminKey(ctx, st, dirA); err != nil || made || again != key {
		t.Fatalf("restart of the first: got %q, %v, %v; want the same key, not made", again, made, err)
	}
	if other, made, err := clusterAdminKey(ctx, st, dirB); err != nil || made || other != "" {
		t.Fatalf("second server: got %q, %v, %v; want no key", other, made, err)
	}
	if _, err := os.Stat(filepath.Join(dirB, "admin.key")); !os.IsNotExist(err) {
		t.Fatalf("second server wrote admin.key: %v", err)
	}

	// The operator makes an admin key elsewhere and removes the first.
	now := time.Now().UTC()
	if err := st.PutKey(ctx, store.Key{ID: "key_ops", Account: "ops", Kind: store.KeyAdmin, Hash: []byte("h-ops-32-bytes-of-hash-material!"), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteKey(ctx, "key_admin"); err != nil {
		t.Fatal(err)
	}
	if k, made, err := clusterAdminKey(ctx, st, dirC); err != nil || made || k != "" {
		t.Fatalf("a start after the rotation: got %q, %v, %v; want no new admin key", k, made, err)
	}
}

// TestClusterAdminKeyAfterAClaimantDied: a start that claimed the first
// key and died before making it does not lock the installation out.
func TestClusterAdminKeyAfterAClaimantDied(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenBolt(t)
	if _, err := st.InitValue(ctx, valueAdminMade, []byte("a claim of a start that died")); err != nil {
		t.Fatal(err)
	}
	key, made, err := clusterAdminKey(ctx, st, t.TempDir())
	if err != nil || !made || key == "" {
		t.Fatalf("got %q, %v, %v; want the key made", key, made, err)
	}
}
