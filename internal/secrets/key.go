package secrets

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the size of the key file: an AES-256 key's worth of random
// bytes, from which the vault derives its keys.
const KeySize = 32

// loadKey reads the key file at path, making it first when there is none.
func loadKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := makeKey(path); err != nil {
			return nil, fmt.Errorf("making secrets key %s: %w", path, err)
		}
		key, err = readKey(path)
	}
	return key, err
}

// readKey reads a key file, which must be a regular file of KeySize bytes
// that only its owner may read.
func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("secrets key %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secrets key %s has mode %v: others may read it (chmod 600 it)", path, perm)
	}
	key, err := io.ReadAll(io.LimitReader(f, KeySize+1))
	if err != nil {
		return nil, fmt.Errorf("reading secrets key %s: %w", path, err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets key %s is not %d bytes long: it is not a key this server made", path, KeySize)
	}
	return key, nil
}

// makeKey writes a new random key to path, mode 0600. The key is written
// to a temporary file, then linked into place: path never holds part of
// a key, and when two servers race, both end up reading the winner's.
func makeKey(path string) (retErr error) {
	key := make([]byte, KeySize)
	rand.Read(key) // never fails (crypto/rand)
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".secrets-key-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	// The new name must outlive a crash as the file does.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
