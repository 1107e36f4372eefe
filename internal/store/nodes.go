package store

import (
	"fmt"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// The node registry's rules for the store that keeps entries as values
// (Bolt; Postgres states them in SQL and shares only the checks and
// errors); now is the store's clock.

func checkRegister(n *Node, ttl time.Duration) error {
	switch {
	case n == nil || n.ID == "":
		return sandbox.Errorf(sandbox.KindInvalid, "node needs an id")
	case ttl <= 0:
		return sandbox.Errorf(sandbox.KindInvalid, "node %s: lease must be positive, not %s", n.ID, ttl)
	}
	return nil
}

// register fills n as the next epoch after prev (nil: a new id).
func register(prev, n *Node, now time.Time, ttl time.Duration) {
	n.Epoch = 1
	if prev != nil {
		n.Epoch = prev.Epoch + 1
	}
	n.RegisteredAt, n.RenewedAt, n.LeaseEndsAt = now, now, now.Add(ttl)
	n.Lost, n.Expired = false, false
}

// renew extends cur's lease if it is still epoch and not lost (cur nil:
// no entry).
func renew(cur *Node, id string, epoch int64, load NodeLoad, now time.Time, ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return sandbox.Errorf(sandbox.KindInvalid, "node %s: lease must be positive, not %s", id, ttl)
	case cur == nil:
		return fmt.Errorf("node %s is not registered: %w", id, ErrStale)
	case cur.Epoch != epoch:
		return fmt.Errorf("node %s is at epoch %d, not %d: %w", id, cur.Epoch, epoch, ErrStale)
	case cur.Lost:
		return fmt.Errorf("node %s was declared lost: %w", id, ErrStale)
	}
	cur.Load, cur.RenewedAt, cur.LeaseEndsAt = load, now, now.Add(ttl)
	cur.Expired = false
	return nil
}

// markLost sets cur.Lost if it is epoch, not lost and its lease has ended.
func markLost(cur *Node, epoch int64, now time.Time) bool {
	if cur.Epoch != epoch || cur.Lost || now.Before(cur.LeaseEndsAt) {
		return false
	}
	cur.Lost = true
	return true
}

// setCert sets cur.Cert if cur is still epoch, not lost, and asks for
// csr (cur nil: no entry).
func setCert(cur *Node, id string, epoch int64, csr, cert string) error {
	switch {
	case cur == nil:
		return fmt.Errorf("node %s is not registered: %w", id, ErrStale)
	case cur.Epoch != epoch || cur.Lost:
		return fmt.Errorf("node %s is not at epoch %d or was declared lost: %w", id, epoch, ErrStale)
	case csr == "" || cur.CSR != csr:
		return fmt.Errorf("node %s asks for another certificate: %w", id, ErrStale)
	}
	cur.Cert = cert
	return nil
}

// setExpired computes n.Expired at now.
func setExpired(n *Node, now time.Time) {
	n.Expired = !now.Before(n.LeaseEndsAt)
}

func nodeNotFound(id string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "node %s not found", id)
}

// storeNow is the clock of the stores without a server: this process's.
func storeNow() time.Time { return time.Now().UTC() }
