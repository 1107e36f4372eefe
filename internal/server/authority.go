package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/store"
)

// authorityKeyEnv gives an API server the key the installation's
// authority is sealed with in the store (hex), in place of
// DATA/authority.key. Nodes never need it.
const authorityKeyEnv = "WITHRUNTIME_AUTHORITY_KEY"

// issueEvery is how often an API server issues the certificates nodes ask
// for, and again those at half their life.
const issueEvery = 2 * time.Second

// openAuthority opens the installation's authority with the seal key of
// $WITHRUNTIME_AUTHORITY_KEY or DATA/authority.key. With neither, this
// server makes a seal key into DATA/authority.key and, if the store has
// no authority yet, the authority: the first API server of an
// installation. Every other API server needs a copy of that key.
func openAuthority(ctx context.Context, st store.Store, dataDir string, quiet bool) (*clusterpki.Authority, error) {
	path := filepath.Join(dataDir, "authority.key")
	if v, ok := os.LookupEnv(authorityKeyEnv); ok {
		os.Unsetenv(authorityKeyEnv)
		k, err := clusterpki.ParseSealKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", authorityKeyEnv, err)
		}
		return openSealed(ctx, st, k, authorityKeyEnv)
	}
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := clusterpki.ParseSealKey(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return openSealed(ctx, st, k, path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the authority's seal key: %w", err)
	}
	// The key is on disk before the authority it seals is in the store: a
	// crash in between leaves a key that seals nothing, never an authority
	// nobody can open.
	k := clusterpki.NewSealKey()
	if err := writeNewFile(path, clusterpki.FormatSealKey(k)+"\n"); err != nil {
		return nil, fmt.Errorf("writing the authority's seal key: %w", err)
	}
	a, err := openSealed(ctx, st, k, path)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	if !quiet {
		fmt.Fprintf(os.Stderr, "withruntime: the installation's authority is sealed with the key in %s: give every other API server a copy (or %s), never a node\n", path, authorityKeyEnv)
	}
	return a, nil
}

func openSealed(ctx context.Context, st store.Store, k []byte, from string) (*clusterpki.Authority, error) {
	a, err := clusterpki.Open(ctx, st, k)
	if errors.Is(err, clusterpki.ErrWrongSealKey) {
		return nil, fmt.Errorf("%w (not the one of %s): give this API server the key the first API server of the installation wrote to its DATA/authority.key, as DATA/authority.key (mode 0600) or in %s", err, from, authorityKeyEnv)
	}
	return a, err
}

// writeNewFile makes path (mode 0600, never over an existing file) with
// data, synced.
func writeNewFile(path, data string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		os.Remove(path)
	}
	return err
}
