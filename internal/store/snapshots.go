package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Snapshots keeps the records of the sandboxes' snapshots (their files are
// the node's: internal/manager).
type Snapshots interface {
	// PutSnapshot inserts s; an id that exists is a conflict-kind error.
	PutSnapshot(ctx context.Context, s *sandbox.Snapshot) error
	// GetSnapshot returns the snapshot with id, or a not_found-kind error.
	GetSnapshot(ctx context.Context, id string) (*sandbox.Snapshot, error)
	// ListSnapshots returns account's snapshots ("": every account's),
	// newest first.
	ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error)
	// ExpiredSnapshots returns the snapshots whose retention ended at or
	// before now.
	ExpiredSnapshots(ctx context.Context, now time.Time) ([]*sandbox.Snapshot, error)
	// DeleteSnapshot removes the record; an absent one is not an error.
	DeleteSnapshot(ctx context.Context, id string) error
	// BillSnapshot moves snapshot id's BilledUntil from from to until and
	// adds delta to the ledger, in one transaction: when BilledUntil is
	// not from (another biller was first) neither changes and the error
	// is conflict-kind; an absent snapshot is not_found-kind.
	BillSnapshot(ctx context.Context, id string, from, until time.Time, delta UsageDelta) error
}

// billed checks that s is billed until from and returns its record
// billed until until, encoded.
func billed(s *sandbox.Snapshot, from, until time.Time) ([]byte, error) {
	if !s.BilledUntil.Equal(from) {
		return nil, sandbox.Errorf(sandbox.KindConflict, "snapshot %s was billed until %s meanwhile", s.ID, s.BilledUntil.Format(time.RFC3339Nano))
	}
	s.BilledUntil = until
	return json.Marshal(s)
}
