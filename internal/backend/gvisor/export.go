package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// ExportRoot implements sandbox.RootExporter: runsc serializes the
// sandbox's root overlay upper layer (what it wrote over its image) as a
// tar stream while the sandbox runs. The stream goes through a pipe to w,
// never to a file: a layer as large as the sandbox's disk is not written
// twice. A w that stops reading (its bound reached) ends runsc.
func (b *Backend) ExportRoot(ctx context.Context, id string, w io.Writer) error {
	b.mu.Lock()
	_, live := b.instances[id]
	b.mu.Unlock()
	if !live {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s is not running here", id)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := b.command(ctx, id, nil, "tar", "rootfs-upper", "--file", "/dev/fd/3", id)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return err
	}
	pw.Close()
	_, copyErr := io.Copy(w, pr)
	if copyErr != nil {
		// The reader refused the stream: runsc need not finish it.
		cancel()
	}
	waitErr := cmd.Wait()
	if copyErr != nil {
		return copyErr
	}
	if waitErr != nil {
		return fmt.Errorf("runsc tar rootfs-upper: %w: %s", waitErr, tail(out.Bytes()))
	}
	return nil
}

var _ sandbox.RootExporter = (*Backend)(nil)
