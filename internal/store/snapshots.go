package store

import (
	"context"
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
}
