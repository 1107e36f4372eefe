package cluster

import (
	"context"

	"github.com/withruntime/withruntime/internal/clusterpki"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Store is what the control plane reads and writes of internal/store: the
// records it routes by and ends when their node is lost, the node
// registry it places on and watches (with what the authority writes there,
// clusterpki.Issuer), the snapshots' and volumes' records (which name
// the node each lives on), and the lock that keeps one failure detector at work
// at a time.
type Store interface {
	GetSandbox(ctx context.Context, id string) (*sandbox.Record, error)
	PutSandbox(ctx context.Context, r *sandbox.Record) error
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Record, error)
	GetNode(ctx context.Context, id string) (*store.Node, error)
	MarkNodeLost(ctx context.Context, id string, epoch int64) (bool, error)
	GetSnapshot(ctx context.Context, id string) (*sandbox.Snapshot, error)
	ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
	GetVolume(ctx context.Context, account, name string) (*store.Volume, error)
	clusterpki.Issuer
	store.Locks
}
