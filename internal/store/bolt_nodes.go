package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RegisterNode stores n as its id's next epoch with a lease of ttl.
func (b *Bolt) RegisterNode(ctx context.Context, n *Node, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRegister(n, ttl); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		prev, err := nodeTx(tx, n.ID)
		if err != nil {
			return err
		}
		next := *n
		register(prev, &next, storeNow(), ttl)
		if err := putNodeTx(tx, &next); err != nil {
			return err
		}
		*n = next
		return nil
	})
}

// RenewNode extends the lease of node id's epoch.
func (b *Bolt) RenewNode(ctx context.Context, id string, epoch int64, load NodeLoad, ttl time.Duration) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *Node
	err := b.db.Update(func(tx *bolt.Tx) error {
		cur, err := nodeTx(tx, id)
		if err != nil {
			return err
		}
		if err := renew(cur, id, epoch, load, storeNow(), ttl); err != nil {
			return err
		}
		out = cur
		return putNodeTx(tx, cur)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetNode returns node id's entry.
func (b *Bolt) GetNode(ctx context.Context, id string) (*Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var n *Node
	err := b.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = nodeTx(tx, id)
		return err
	})
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
func (b *Bolt) ListNodes(ctx context.Context) ([]Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Node
	err := b.db.View(func(tx *bolt.Tx) error {
		now := storeNow()
		return tx.Bucket(bucketNodes).ForEach(func(id, v []byte) error {
			var n Node
			if err := json.Unmarshal(v, &n); err != nil {
				return fmt.Errorf("decoding node %s: %w", id, err)
			}
			setExpired(&n, now)
			out = append(out, n)
			return nil
		})
	})
	return out, err
}

// MarkNodeLost declares node id's epoch lost once its lease has ended.
func (b *Bolt) MarkNodeLost(ctx context.Context, id string, epoch int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var marked bool
	err := b.db.Update(func(tx *bolt.Tx) error {
		cur, err := nodeTx(tx, id)
		if err != nil {
			return err
		}
		if cur == nil {
			return nodeNotFound(id)
		}
		if marked = markLost(cur, epoch, storeNow()); !marked {
			return nil
		}
		return putNodeTx(tx, cur)
	})
	return marked, err
}

// SetNodeCert sets the certificate of node id's epoch for csr.
func (b *Bolt) SetNodeCert(ctx context.Context, id string, epoch int64, csr, cert string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		cur, err := nodeTx(tx, id)
		if err != nil {
			return err
		}
		if err := setCert(cur, id, epoch, csr, cert); err != nil {
			return err
		}
		return putNodeTx(tx, cur)
	})
}

// nodeTx reads node id's entry in tx (nil when absent).
func nodeTx(tx *bolt.Tx, id string) (*Node, error) {
	v := tx.Bucket(bucketNodes).Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	n := new(Node)
	if err := json.Unmarshal(v, n); err != nil {
		return nil, fmt.Errorf("decoding node %s: %w", id, err)
	}
	return n, nil
}

func putNodeTx(tx *bolt.Tx, n *Node) error {
	v, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encoding node %s: %w", n.ID, err)
	}
	return tx.Bucket(bucketNodes).Put([]byte(n.ID), v)
}
