package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Memory is a Store that keeps everything in the process's memory, for
// unit tests of the packages above the store (the manager's lifecycle
// suite). Values are kept JSON-encoded, as Bolt keeps them, so that a
// caller never shares memory with the store and round trips lose what
// Bolt's lose: the two pass the same suite (store_suite_test.go).
type Memory struct {
	mu        sync.Mutex
	sandboxes map[string][]byte
	keys      map[string][]byte
	keyHashes map[string]string // hash -> key id
	keysGone  map[string][]byte
	accounts  map[string][]byte
	usage     map[string]UsageRow // day \x00 account \x00 key id
	secrets   map[string][]byte   // secretKey(account, name)
	nodes     map[string][]byte
	values    map[string][]byte
	locks     locks
}

// NewMemory makes an empty memory store.
func NewMemory() *Memory {
	return &Memory{
		sandboxes: map[string][]byte{},
		keys:      map[string][]byte{},
		keyHashes: map[string]string{},
		keysGone:  map[string][]byte{},
		accounts:  map[string][]byte{},
		usage:     map[string]UsageRow{},
		secrets:   map[string][]byte{},
		nodes:     map[string][]byte{},
		values:    map[string][]byte{},
	}
}

// Close does nothing: there is nothing to release.
func (s *Memory) Close() error { return nil }

func encode(kind, id string, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", kind, id, err)
	}
	return data, nil
}

func decode[T any](kind, id string, data []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", kind, id, err)
	}
	return v, nil
}

// PutSandbox inserts r or replaces the stored record of r's version.
func (s *Memory) PutSandbox(ctx context.Context, r *sandbox.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.casSandbox(r)
}

// GetSandbox returns the record with id.
func (s *Memory) GetSandbox(ctx context.Context, id string) (*sandbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	data, ok := s.sandboxes[id]
	s.mu.Unlock()
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	return decode[sandbox.Record]("sandbox", id, data)
}

// ListSandboxes returns the records that pass f, oldest first.
func (s *Memory) ListSandboxes(ctx context.Context, f SandboxFilter) ([]*sandbox.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*sandbox.Record
	for id, data := range s.sandboxes {
		r, err := decode[sandbox.Record]("sandbox", id, data)
		if err != nil {
			return nil, err
		}
		if f.Match(r) {
			out = append(out, r)
		}
	}
	sortRecords(out)
	return out, nil
}

// DeleteSandbox removes the record with id.
func (s *Memory) DeleteSandbox(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sandboxes[id]; !ok {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s not found", id)
	}
	delete(s.sandboxes, id)
	return nil
}

// PutKey inserts or replaces k and indexes it by its hash.
func (s *Memory) PutKey(ctx context.Context, k Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(k); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putKeyLocked(k)
}

// putKeyLocked is PutKey with s.mu held.
func (s *Memory) putKeyLocked(k Key) error {
	data, err := encode("key", k.ID, k)
	if err != nil {
		return err
	}
	if owner, ok := s.keyHashes[string(k.Hash)]; ok && owner != k.ID {
		return sandbox.Errorf(sandbox.KindConflict, "key %s: another key has the same secret", k.ID)
	}
	if old, ok := s.keys[k.ID]; ok {
		prev, err := decode[Key]("key", k.ID, old)
		if err != nil {
			return err
		}
		if !bytes.Equal(prev.Hash, k.Hash) {
			delete(s.keyHashes, string(prev.Hash))
		}
	}
	s.keyHashes[string(k.Hash)] = k.ID
	s.keys[k.ID] = data
	return nil
}

// checkKey refuses keys no store may hold.
func checkKey(k Key) error {
	switch {
	case k.ID == "":
		return sandbox.Errorf(sandbox.KindInvalid, "key needs an id")
	case k.Account == "":
		return sandbox.Errorf(sandbox.KindInvalid, "key %s needs an account", k.ID)
	case !k.Kind.Valid():
		return sandbox.Errorf(sandbox.KindInvalid, "key %s has unknown kind %q", k.ID, k.Kind)
	case len(k.Hash) != sha256.Size:
		return sandbox.Errorf(sandbox.KindInvalid, "key %s: hash is %d bytes, want %d", k.ID, len(k.Hash), sha256.Size)
	}
	return nil
}

// KeyByHash returns the key whose secret hashes to hash.
func (s *Memory) KeyByHash(ctx context.Context, hash []byte) (*Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.keyHashes[string(hash)]
	if !ok || len(hash) == 0 {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "key not found")
	}
	data, ok := s.keys[id]
	if !ok {
		return nil, fmt.Errorf("key index names missing key %s", id)
	}
	return decode[Key]("key", id, data)
}

// ListKeys returns the keys of account (every key when it is empty),
// oldest first.
func (s *Memory) ListKeys(ctx context.Context, account string) ([]Key, error) {
	return s.listKeys(ctx, account, false)
}

// ListAllKeys returns the keys of account, removed ones included, oldest
// first.
func (s *Memory) ListAllKeys(ctx context.Context, account string) ([]Key, error) {
	return s.listKeys(ctx, account, true)
}

func (s *Memory) listKeys(ctx context.Context, account string, removed bool) ([]Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keysLocked(account, removed)
}

// keysLocked is listKeys with s.mu held.
func (s *Memory) keysLocked(account string, removed bool) ([]Key, error) {
	sets := []map[string][]byte{s.keys}
	if removed {
		sets = append(sets, s.keysGone)
	}
	var out []Key
	for _, set := range sets {
		for id, data := range set {
			k, err := decode[Key]("key", id, data)
			if err != nil {
				return nil, err
			}
			if account == "" || k.Account == account {
				out = append(out, *k)
			}
		}
	}
	sortKeys(out)
	return out, nil
}

// DeleteKey removes the key with id and every key made through it; each is
// kept, without its hash, in the removed keys.
func (s *Memory) DeleteKey(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteKeyLocked(id)
}

// deleteKeyLocked is DeleteKey with s.mu held.
func (s *Memory) deleteKeyLocked(id string) error {
	if _, ok := s.keys[id]; !ok {
		return sandbox.Errorf(sandbox.KindNotFound, "key %s not found", id)
	}
	var all []Key
	for kid, data := range s.keys {
		k, err := decode[Key]("key", kid, data)
		if err != nil {
			return err
		}
		all = append(all, *k)
	}
	tree := NewKeyTree(all)
	now := time.Now().UTC()
	gone := map[string][]byte{}
	for _, kid := range tree.Subtree(id) {
		k, _ := tree.Key(kid)
		delete(s.keyHashes, string(k.Hash))
		k.Hash, k.RemovedAt = nil, &now
		data, err := encode("key", kid, k)
		if err != nil {
			return err
		}
		gone[kid] = data
	}
	for kid, data := range gone {
		delete(s.keys, kid)
		s.keysGone[kid] = data
	}
	return nil
}

// PutAccount inserts or replaces a.
func (s *Memory) PutAccount(ctx context.Context, a Account) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "account needs an id")
	}
	data, err := encode("account", a.ID, a)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accounts[a.ID] = data
	return nil
}

// GetAccount returns the account with id.
func (s *Memory) GetAccount(ctx context.Context, id string) (*Account, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	data, ok := s.accounts[id]
	s.mu.Unlock()
	if !ok {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "account %s not found", id)
	}
	return decode[Account]("account", id, data)
}

// ListAccounts returns every account, oldest first.
func (s *Memory) ListAccounts(ctx context.Context) ([]Account, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Account
	for id, data := range s.accounts {
		a, err := decode[Account]("account", id, data)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	slices.SortStableFunc(out, func(x, y Account) int {
		if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return out, nil
}

// RecordUsage replaces r (if it has the stored version) and adds delta to
// its ledger row, atomically.
func (s *Memory) RecordUsage(ctx context.Context, r *sandbox.Record, delta UsageDelta) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	if !delta.Empty() && delta.Day == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "usage delta needs a day")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The version check comes first: a stale bill changes nothing.
	if err := s.casSandbox(r); err != nil {
		return err
	}
	if !delta.Empty() {
		key := delta.Day + "\x00" + delta.Account + "\x00" + delta.KeyID
		row, ok := s.usage[key]
		if !ok {
			row = UsageRow{Day: delta.Day, Account: delta.Account, KeyID: delta.KeyID}
		}
		row.AliveMs += delta.AliveMs
		row.MemoryMiBMs += delta.MemoryMiBMs
		row.CPUNs += delta.CPUNs
		row.CostNanos += delta.CostNanos
		s.usage[key] = row
	}
	return nil
}

// Usage returns the ledger rows that pass f, ordered by day, account, key.
func (s *Memory) Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.usage))
	for k := range s.usage {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []UsageRow
	for _, k := range keys {
		if row := s.usage[k]; f.Match(row) {
			out = append(out, row)
		}
	}
	return out, nil
}

// PutSecret inserts or replaces s.
func (s *Memory) PutSecret(ctx context.Context, sec Secret) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSecretID(sec.Account, sec.Name); err != nil {
		return err
	}
	if len(sec.Nonce) == 0 || len(sec.Ciphertext) == 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "secret %s needs a nonce and a ciphertext", sec.Name)
	}
	data, err := encode("secret", sec.Name, sec)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets[string(secretKey(sec.Account, sec.Name))] = data
	return nil
}

// ListSecrets returns the secrets of account, by name.
func (s *Memory) ListSecrets(ctx context.Context, account string) ([]Secret, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if account == "" || strings.IndexByte(account, 0) >= 0 {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "listing secrets needs an account without NUL bytes")
	}
	prefix := account + "\x00"
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for k := range s.secrets {
		if strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []Secret
	for _, k := range names {
		sec, err := decode[Secret]("secret", k[len(prefix):], s.secrets[k])
		if err != nil {
			return nil, err
		}
		out = append(out, *sec)
	}
	return out, nil
}

// DeleteSecret removes the secret name of account.
func (s *Memory) DeleteSecret(ctx context.Context, account, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSecretID(account, name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := string(secretKey(account, name))
	if _, ok := s.secrets[key]; !ok {
		return sandbox.Errorf(sandbox.KindNotFound, "secret %s not found", name)
	}
	delete(s.secrets, key)
	return nil
}
