package gvisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Start implements sandbox.Backend.
func (b *Backend) Start(ctx context.Context, id string, spec sandbox.Spec) (_ sandbox.Instance, retErr error) {
	p := b.paths(id)
	defer func() {
		if retErr != nil {
			b.Destroy(context.WithoutCancel(ctx), id)
		}
	}()
	if err := b.prepare(id, p, spec); err != nil {
		return nil, err
	}
	if err := b.runscDetached(ctx, id, &spec, "run", "--detach", "--bundle", p.bundle, "--pid-file", p.pidFile, id); err != nil {
		return nil, err
	}
	return b.connect(ctx, id, p)
}

// prepare makes the sandbox's directories, network namespace and spec.
func (b *Backend) prepare(id string, p paths, spec sandbox.Spec) error {
	rootfs, err := image.Rootfs(b.cfg.CacheDir, spec.Image)
	if err != nil {
		return err
	}
	for _, d := range []string{p.upper, p.sock} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// The agent drops its socket here and runs as root inside; the
	// directory is private to the host's root.
	if err := network.NewNamespace(p.netns); err != nil {
		return fmt.Errorf("making network namespace: %w", err)
	}
	if err := b.attachNetwork(id, p, spec); err != nil {
		return err
	}
	return b.writeSpec(id, p, rootfs, spec)
}

// connect waits until the agent answers on its socket, then watches the
// sandbox process.
func (b *Backend) connect(ctx context.Context, id string, p paths) (*instance, error) {
	inst := &instance{id: id, sock: filepath.Join(p.sock, "agent.sock"), done: make(chan struct{})}
	if err := inst.waitReady(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	pid, err := readPid(p.pidFile)
	if err != nil {
		return nil, err
	}
	if err := inst.watch(pid); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.instances[id] = inst
	b.mu.Unlock()
	return inst, nil
}

func readPid(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading sandbox pid: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// instance is a live gVisor sandbox.
type instance struct {
	id   string
	sock string
	done chan struct{}

	reason  sandbox.EndReason // set before done is closed
	message string
}

var _ sandbox.Instance = (*instance)(nil)

func (i *instance) DialAgent(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", i.sock)
}

func (i *instance) Done() <-chan struct{} { return i.done }

func (i *instance) Cause() (sandbox.EndReason, string) { return i.reason, i.message }

// waitReady waits until the agent answers: first for its socket to appear
// (a cheap stat every millisecond: the agent is up within tens of them),
// then for its health route.
func (i *instance) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return i.DialAgent(ctx)
	}, DisableKeepAlives: true}}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		if _, serr := os.Stat(i.sock); serr == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/healthz", nil)
			var resp *http.Response
			if resp, err = client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				err = fmt.Errorf("agent answered %s", resp.Status)
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("its socket never appeared")
			}
			return fmt.Errorf("waiting for the agent: %w", err)
		case <-tick.C:
		}
	}
}
