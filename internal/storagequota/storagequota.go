// Package storagequota bounds the bytes an account keeps on the platform's
// disks beyond its sandboxes' lives: its volumes' sizes and its snapshots'
// bytes, together, against one quota (serve --storage-quota-gib).
package storagequota

import (
	"context"
	"sync"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// DefaultGiB is the quota a server sets unless told.
const DefaultGiB = 100

// Source counts the bytes one kind of record holds for account.
type Source func(ctx context.Context, account string) (int64, error)

// Quota is an account's storage quota and what counts against it. Its
// zero value has no limit.
type Quota struct {
	// Bytes is the quota (0: none).
	Bytes int64

	mu      sync.Mutex
	sources map[string]Source // guarded by mu: by kind
}

// New returns a quota of gib GiB (0: none).
func New(gib int) *Quota { return &Quota{Bytes: int64(gib) << 30} }

// Add counts src's bytes, under kind ("volumes", "snapshots"), from now on.
func (q *Quota) Add(kind string, src Source) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.sources == nil {
		q.sources = map[string]Source{}
	}
	q.sources[kind] = src
}

// Used returns the bytes account holds, every kind together.
func (q *Quota) Used(ctx context.Context, account string) (int64, error) {
	q.mu.Lock()
	srcs := make([]Source, 0, len(q.sources))
	for _, s := range q.sources {
		srcs = append(srcs, s)
	}
	q.mu.Unlock()
	var sum int64
	for _, s := range srcs {
		n, err := s(ctx, account)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// Check refuses, with a forbidden error, extra more bytes for account when
// they would take it past the quota. A nil Quota or one of 0 bytes allows
// everything.
func (q *Quota) Check(ctx context.Context, account string, extra int64) error {
	if q == nil || q.Bytes <= 0 {
		return nil
	}
	used, err := q.Used(ctx, account)
	if err != nil {
		return err
	}
	if used+extra > q.Bytes {
		return sandbox.Errorf(sandbox.KindForbidden, "storage quota exceeded: the account holds %d of its %d GiB in volumes and snapshots, and this needs %d bytes more",
			used, q.Bytes>>30, extra)
	}
	return nil
}

// Snapshots is the Source of an account's snapshots' bytes in st.
func Snapshots(st interface {
	ListSnapshots(ctx context.Context, account string) ([]*sandbox.Snapshot, error)
}) Source {
	return func(ctx context.Context, account string) (int64, error) {
		list, err := st.ListSnapshots(ctx, account)
		var n int64
		for _, s := range list {
			n += s.SizeBytes
		}
		return n, err
	}
}
