package gvisor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// resumeFlag is the file whose presence tells a suspended agent that it
// may listen again. gVisor cannot checkpoint a socket bound on the host, so
// the agent closes its socket before a checkpoint and waits for this file
// after the restore.
const resumeFlag = "resume"

// Pause implements sandbox.Backend.
func (b *Backend) Pause(ctx context.Context, id string) error {
	p := b.paths(id)
	b.mu.Lock()
	inst := b.instances[id]
	delete(b.instances, id)
	b.mu.Unlock()
	if inst == nil {
		return fmt.Errorf("sandbox %s is not running here", id)
	}
	os.Remove(filepath.Join(p.sock, resumeFlag))
	if err := suspendAgent(ctx, inst); err != nil {
		return fmt.Errorf("suspending agent: %w", err)
	}
	os.RemoveAll(p.checkpoint)
	if err := os.MkdirAll(p.checkpoint, 0o700); err != nil {
		return err
	}
	if _, err := b.runsc(ctx, id, nil, "checkpoint", "--image-path", p.checkpoint, id); err != nil {
		return err
	}
	b.stopContainer(ctx, id, p)
	removeCgroups(id)
	b.detachNetwork(id, p)
	return network.RemoveNamespace(p.netns)
}

func suspendAgent(ctx context.Context, inst *instance) error {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
		DisableKeepAlives: true,
	}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/suspend", nil)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent answered %s", resp.Status)
	}
	// The agent removes its socket once it has closed every connection.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(inst.sock); os.IsNotExist(err) {
			return nil
		}
	}
	return fmt.Errorf("agent kept its socket open")
}

// Resume implements sandbox.Backend.
func (b *Backend) Resume(ctx context.Context, id string, spec sandbox.Spec) (_ sandbox.Instance, retErr error) {
	p := b.paths(id)
	if _, err := os.Stat(filepath.Join(p.checkpoint, "checkpoint.img")); err != nil {
		return nil, fmt.Errorf("no checkpoint for %s", id)
	}
	defer func() {
		if retErr != nil {
			b.stopContainer(context.WithoutCancel(ctx), id, p)
			b.detachNetwork(id, p)
			network.RemoveNamespace(p.netns)
		}
	}()
	if err := b.prepare(id, p, spec); err != nil {
		return nil, err
	}
	if err := b.runscDetached(ctx, id, &spec, "restore", "--detach", "--image-path", p.checkpoint, "--bundle", p.bundle, "--pid-file", p.pidFile, id); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(p.sock, resumeFlag), nil, 0o600); err != nil {
		return nil, err
	}
	inst, err := b.connect(ctx, id, p)
	if err != nil {
		return nil, err
	}
	os.RemoveAll(p.checkpoint)
	return inst, nil
}
