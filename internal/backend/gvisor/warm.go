package gvisor

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// The CPU priorities of a sandbox. A pool member waits at the lowest, so
// that booting and idling spare sandboxes never takes CPU from live ones'
// work; once claimed it has the kernel's default, like any other.
// warmShares is the OCI spec's lowest cpu.shares. runsc writes it to
// cpu.shares on cgroup v1 and turns it into cpu.weight 1 on v2.
const warmShares = 2

var _ sandbox.Warmer = (*Backend)(nil)

// StartWarm implements sandbox.Warmer: Start, at the lowest CPU priority,
// then one run of python3 that fills the new sandbox's own caches.
func (b *Backend) StartWarm(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Instance, error) {
	inst, err := b.start(ctx, id, spec, true)
	if err != nil {
		return nil, err
	}
	if i, ok := inst.(*instance); ok {
		warmCaches(ctx, i)
	}
	return inst, nil
}

// warmExec is the command a pool member runs once before it is ready. The
// first python3 in a gVisor sandbox costs about 20 ms more than any later
// one: the sandbox's kernel fills its dentry cache and file pages from the
// image, for every later start in that sandbox. It runs as the sandbox
// user in /, writes no bytecode (-B) and reads nothing of anyone's, and it
// has ended before the member can be claimed: no file, process or
// environment of it is left, and nothing ran for any user.
const warmExec = `{"cmd":["python3","-B","-c","pass"],"cwd":"/","timeout_ms":10000}`

// warmWait bounds the warm-up; a member whose warm-up fails or times out
// is handed out all the same, only without the warm caches.
const warmWait = 15 * time.Second

// warmCaches runs warmExec through the agent and reads its answer to the
// end, bounded.
func warmCaches(ctx context.Context, inst *instance) {
	ctx, cancel := context.WithTimeout(ctx, warmWait)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{
		DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return inst.DialAgent(ctx) },
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 4 << 10,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/exec", strings.NewReader(warmExec))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
}

// Claim implements sandbox.Warmer: the sandbox's cgroup gets the default
// CPU priority. A sandbox with no cgroup (gone) is an error.
func (b *Backend) Claim(ctx context.Context, id string) error {
	return hostCgroups().NormalCPU(id)
}
