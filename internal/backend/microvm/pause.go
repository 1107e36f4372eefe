package microvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Pause implements sandbox.Backend: the agent drops its connections,
// QEMU migrates the machine (memory, devices) into a file the host
// opened, and QEMU ends. The disk stays as it is.
func (b *Backend) Pause(ctx context.Context, id string) error {
	i, err := b.running(id)
	if err != nil {
		return err
	}
	p := b.paths(id)
	// A QEMU that stops answering its monitor, or keeps its migration
	// going, is ended when the time is up: the host waits on it no longer
	// (the manager then ends the sandbox, as after any failed pause).
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout(i.memMiB))
	defer cancel()
	stopWatchdog := context.AfterFunc(ctx, i.kill)
	defer stopWatchdog()
	if err := i.agent().Suspend(ctx); err != nil {
		return fmt.Errorf("suspending the agent: %w", err)
	}
	if err := os.MkdirAll(p.checkpoint, 0o700); err != nil {
		return err
	}
	state := filepath.Join(p.checkpoint, "machine")
	f, err := os.OpenFile(state+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := i.qmp.run("stop", nil, nil); err != nil {
		return err
	}
	if err := saveMachine(ctx, i, f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := os.Rename(state+".tmp", state); err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.instances, id)
	b.mu.Unlock()
	i.kill()
	<-i.done
	releaseJail(p)
	return b.cg.Remove(id)
}

// saveMachine migrates the stopped machine of i into f. On failure the
// machine runs on (QMP cont).
func saveMachine(ctx context.Context, i *instance, f *os.File) error {
	// QEMU writes into a pipe, and the host copies at most what a machine
	// of this size can hold into the file: QEMU is untrusted, and a file
	// it wrote itself could fill the disk.
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	err = i.qmp.sendFD("state", w)
	w.Close() // QEMU holds its own copy
	if err != nil {
		return err
	}
	copied := make(chan error, 1)
	go func() {
		copied <- copyBounded(f, r, checkpointLimit(i.memMiB))
		r.Close() // past the limit QEMU's writes fail: the migration fails
	}()
	// fail gives the checkpoint up: closing the pipe's end ends the copy
	// whoever else holds the other end, and the machine runs on.
	fail := func(err error) error {
		r.Close()
		if cerr := <-copied; errors.Is(cerr, errCheckpointTooLarge) {
			err = cerr // why the migration failed
		}
		i.qmp.run("cont", nil, nil)
		return err
	}
	// QEMU's default migration speed is 32 MiB/s, tuned for networks; a
	// local file takes what the disk gives.
	if err := i.qmp.run("migrate-set-parameters", map[string]any{"max-bandwidth": int64(8) << 30}, nil); err != nil {
		return fail(err)
	}
	if err := i.qmp.run("migrate", map[string]string{"uri": "fd:state"}, nil); err != nil {
		return fail(err)
	}
	if err := waitMigration(ctx, i.qmp); err != nil {
		return fail(err)
	}
	// A completed migration closes QEMU's end of the pipe; a QEMU that
	// keeps it open is ended, which closes it (what it wrote is all read;
	// the deadline covers a copy of the descriptor QEMU passed on).
	select {
	case err = <-copied:
	case <-time.After(10 * time.Second):
		i.kill()
		<-i.done
		r.SetReadDeadline(time.Now().Add(time.Second))
		err = <-copied
	}
	if err != nil {
		i.qmp.run("cont", nil, nil)
	}
	return err
}

// waitMigration polls query-migrate until it completes.
func waitMigration(ctx context.Context, q *qmp) error {
	for {
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := q.run("query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("saving the machine: %s %s", st.Status, st.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			q.run("migrate_cancel", nil, nil)
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Resume implements sandbox.Backend: a new QEMU takes the saved machine
// (-incoming defer, then migrate-incoming from the file the host opened).
func (b *Backend) Resume(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	p := b.paths(id)
	state := filepath.Join(p.checkpoint, "machine")
	f, err := os.OpenFile(state, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindNotFound, err, "no checkpoint")
	}
	defer f.Close()
	tap, err := b.reopenTap(id, p)
	if err != nil {
		return nil, err
	}
	if tap != nil {
		defer tap.Close()
	}
	inst, err := b.boot(ctx, id, p, spec, tap, loadMachine(ctx, f), false)
	if err != nil {
		return nil, err
	}
	os.RemoveAll(p.checkpoint)
	return inst, nil
}

// loadMachine has a QEMU started with -incoming defer take the machine
// saved in f.
func loadMachine(ctx context.Context, f *os.File) func(*qmp) error {
	return func(q *qmp) error {
		if err := q.sendFD("state", f); err != nil {
			return err
		}
		if err := q.run("migrate-incoming", map[string]string{"uri": "fd:state"}, nil); err != nil {
			return err
		}
		return waitIncoming(ctx, q)
	}
}

// waitIncoming waits until the incoming migration has loaded the machine
// (QEMU then stands paused).
func waitIncoming(ctx context.Context, q *qmp) error {
	for {
		var st struct {
			Status string `json:"status"`
		}
		if err := q.run("query-status", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "paused", "postmigrate", "prelaunch":
			if st.Status != "inmigrate" {
				return nil
			}
		case "internal-error", "shutdown", "guest-panicked":
			return fmt.Errorf("restoring the machine: %s", st.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CPUTime implements sandbox.Meter: the CPU of QEMU's cgroup.
func (b *Backend) CPUTime(id string) (time.Duration, error) { return b.cg.CPUTime(id) }

// pauseTimeout bounds a pause of a machine of memMiB: a minute, and a
// second for each 64 MiB it may have to write.
func pauseTimeout(memMiB int) time.Duration {
	return time.Minute + time.Duration(memMiB/64)*time.Second
}

// checkpointLimit bounds a saved machine of memMiB: its pages with their
// headers, and the devices' state.
func checkpointLimit(memMiB int) int64 {
	return int64(memMiB)<<20 + int64(memMiB)<<20/16 + 64<<20
}

// errCheckpointTooLarge is a saved machine larger than its memory allows.
var errCheckpointTooLarge = errors.New("saving the machine: QEMU wrote more than the machine's memory can hold")

// copyBounded copies r to w until r ends, failing once more than limit
// bytes came.
func copyBounded(w io.Writer, r io.Reader, limit int64) error {
	n, err := io.Copy(w, io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("saving the machine: %w", err)
	}
	if n > limit {
		return errCheckpointTooLarge
	}
	return nil
}
