package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// runsc runs one runsc command for sandbox id with the flags every
// command of that sandbox must share.
func (b *Backend) runsc(ctx context.Context, id string, spec *sandbox.Spec, args ...string) ([]byte, error) {
	cmd := b.command(ctx, id, spec, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("runsc %s: %w: %s", args[0], err, tail(errb.Bytes()))
	}
	return out.Bytes(), nil
}

// runscDetached runs a runsc command that leaves a sandbox behind (run,
// restore). The sandbox inherits the command's stdio, so it gets a file,
// never a pipe: a pipe would stay open as long as the sandbox lives and the
// command would never be seen to end.
func (b *Backend) runscDetached(ctx context.Context, id string, spec *sandbox.Spec, args ...string) error {
	logPath := filepath.Join(b.paths(id).state, "console.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := b.command(ctx, id, spec, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		data, _ := os.ReadFile(logPath)
		return fmt.Errorf("runsc %s: %w: %s", args[0], err, tail(data))
	}
	return nil
}

func (b *Backend) command(ctx context.Context, id string, spec *sandbox.Spec, args ...string) *exec.Cmd {
	flags := []string{
		"--root", b.runscRoot(),
		"--platform", "systrap",
		"--network", "sandbox",
		// The agent may connect to the host's listener; it can create
		// no socket on the host.
		"--host-uds", "open",
		"--allow-suid",
		// Mounts other than the root (volumes) may change under the
		// sandbox: another sandbox writes the same volume.
		"--file-access-mounts", "shared",
	}
	if spec != nil {
		flags = append(flags, "--overlay2", fmt.Sprintf("root:dir=%s,size=%dm", b.paths(id).upper, spec.DiskMiB))
	}
	cmd := exec.CommandContext(ctx, b.cfg.Runsc, append(flags, args...)...)
	cmd.Stdin = nil
	return cmd
}

// tail keeps the end of runsc's output for an error message.
func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}
