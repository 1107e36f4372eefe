package gvisor

import (
	"context"
)

// Freeze implements sandbox.Freezer: `runsc pause` stops every task of
// the sandbox's kernel where it is; its memory stays, and so does its
// process on the host (Done does not fire).
func (b *Backend) Freeze(ctx context.Context, id string) error {
	_, err := b.runsc(ctx, id, nil, "pause", id)
	return err
}

// Thaw implements sandbox.Freezer: `runsc resume` lets a frozen sandbox go
// on.
func (b *Backend) Thaw(ctx context.Context, id string) error {
	_, err := b.runsc(ctx, id, nil, "resume", id)
	return err
}
