package store

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// casSandbox writes r if the stored record still has r's version (or, for
// version 0, does not exist), bumping r.Version. s.mu is held.
func (s *Memory) casSandbox(r *sandbox.Record) error {
	if err := checkVersion(r, s.sandboxes[r.ID]); err != nil {
		return err
	}
	r.Version++
	data, err := encode("sandbox", r.ID, r)
	if err != nil {
		r.Version--
		return err
	}
	s.sandboxes[r.ID] = data
	return nil
}

// AdmitSandbox writes r like PutSandbox unless its account already has
// limit live records other than r.
func (s *Memory) AdmitSandbox(ctx context.Context, r *sandbox.Record, limit int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r == nil || r.ID == "" {
		return sandbox.Errorf(sandbox.KindInvalid, "sandbox record needs an id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit > 0 {
		n := 0
		for id, data := range s.sandboxes {
			if id == r.ID {
				continue
			}
			other, err := decode[sandbox.Record]("sandbox", id, data)
			if err != nil {
				return err
			}
			if other.Account == r.Account && other.Live() {
				n++
			}
		}
		if n >= limit {
			return concurrencyError(r.Account, n)
		}
	}
	return s.casSandbox(r)
}

// CreateAccount stores a unless an account with its id or name exists.
func (s *Memory) CreateAccount(ctx context.Context, a Account) error {
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
	if _, ok := s.accounts[a.ID]; ok {
		return sandbox.Errorf(sandbox.KindConflict, "account %s already exists", a.ID)
	}
	if a.Name != "" {
		for id, v := range s.accounts {
			other, err := decode[Account]("account", id, v)
			if err != nil {
				return err
			}
			if other.Name == a.Name {
				return sandbox.Errorf(sandbox.KindConflict, "an account named %s already exists", a.Name)
			}
		}
	}
	s.accounts[a.ID] = data
	return nil
}

// PutKeyIf stores k if check accepts the keys of k's account, under one
// hold of the store's lock.
func (s *Memory) PutKeyIf(ctx context.Context, k Key, check func(keys []Key) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(k); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, err := s.keysLocked(k.Account, false)
	if err != nil {
		return err
	}
	if err := check(keys); err != nil {
		return err
	}
	return s.putKeyLocked(k)
}

// DeleteKeyIf is DeleteKey once check accepts the keys of account (every
// key when it is ""), under one hold of the store's lock.
func (s *Memory) DeleteKeyIf(ctx context.Context, id, account string, check func(keys []Key) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, err := s.keysLocked(account, false)
	if err != nil {
		return err
	}
	if err := check(keys); err != nil {
		return err
	}
	return s.deleteKeyLocked(id)
}

// RegisterNode stores n as its id's next epoch with a lease of ttl.
func (s *Memory) RegisterNode(ctx context.Context, n *Node, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRegister(n, ttl); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, err := s.nodeLocked(n.ID)
	if err != nil {
		return err
	}
	next := *n
	register(prev, &next, storeNow(), ttl)
	if err := s.putNodeLocked(&next); err != nil {
		return err
	}
	*n = next
	return nil
}

// RenewNode extends the lease of node id's epoch.
func (s *Memory) RenewNode(ctx context.Context, id string, epoch int64, load NodeLoad, ttl time.Duration) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.nodeLocked(id)
	if err != nil {
		return nil, err
	}
	if err := renew(cur, id, epoch, load, storeNow(), ttl); err != nil {
		return nil, err
	}
	if err := s.putNodeLocked(cur); err != nil {
		return nil, err
	}
	return cur, nil
}

// GetNode returns node id's entry.
func (s *Memory) GetNode(ctx context.Context, id string) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.nodeLocked(id)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, nodeNotFound(id)
	}
	setExpired(n, storeNow())
	return n, nil
}

// ListNodes returns every node's entry, by id.
func (s *Memory) ListNodes(ctx context.Context) ([]Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.nodes))
	for id := range s.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	now := storeNow()
	var out []Node
	for _, id := range ids {
		n, err := decode[Node]("node", id, s.nodes[id])
		if err != nil {
			return nil, err
		}
		setExpired(n, now)
		out = append(out, *n)
	}
	return out, nil
}

// MarkNodeLost declares node id's epoch lost once its lease has ended.
func (s *Memory) MarkNodeLost(ctx context.Context, id string, epoch int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.nodeLocked(id)
	if err != nil {
		return false, err
	}
	if cur == nil {
		return false, nodeNotFound(id)
	}
	if !markLost(cur, epoch, storeNow()) {
		return false, nil
	}
	return true, s.putNodeLocked(cur)
}

// SetNodeCert sets the certificate of node id's epoch for csr.
func (s *Memory) SetNodeCert(ctx context.Context, id string, epoch int64, csr, cert string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.nodeLocked(id)
	if err != nil {
		return err
	}
	if err := setCert(cur, id, epoch, csr, cert); err != nil {
		return err
	}
	return s.putNodeLocked(cur)
}

func (s *Memory) nodeLocked(id string) (*Node, error) {
	data, ok := s.nodes[id]
	if !ok {
		return nil, nil
	}
	return decode[Node]("node", id, data)
}

func (s *Memory) putNodeLocked(n *Node) error {
	data, err := encode("node", n.ID, n)
	if err != nil {
		return err
	}
	s.nodes[n.ID] = data
	return nil
}

// InitValue stores value under name unless one is there, and returns the
// stored one.
func (s *Memory) InitValue(ctx context.Context, name string, value []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkValue(name, value); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.values[name]; ok {
		return bytes.Clone(v), nil
	}
	s.values[name] = bytes.Clone(value)
	return bytes.Clone(value), nil
}

// TryLock takes the lock name in this process.
func (s *Memory) TryLock(ctx context.Context, name string) (func(), bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	unlock, ok := s.locks.try(name)
	return unlock, ok, nil
}
