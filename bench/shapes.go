package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// shape is what a measured create does before the clock stops: the
// commands a user's first moments run.
type shape struct {
	name string
	run  func(ctx context.Context, c *client.Client, id string) error
}

var (
	python     = api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-c", "print(1)"}}}
	echoProbe  = api.ExecRequest{Cmd: api.Command{Argv: []string{"echo", "probe"}}}
	pyVersion  = api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "--version"}}}
	shapePy    = shape{"first python3", func(ctx context.Context, c *client.Client, id string) error { return expect(ctx, c, id, python, "1\n") }}
	shapeProbe = shape{"echo + python3 --version", func(ctx context.Context, c *client.Client, id string) error {
		if err := expect(ctx, c, id, echoProbe, "probe\n"); err != nil {
			return err
		}
		return expect(ctx, c, id, pyVersion, "Python 3")
	}}
	// shapeCreate stops the clock at the create's answer: what the
	// platform itself costs, without the sandbox's own programs.
	shapeCreate = shape{"create answered", func(context.Context, *client.Client, string) error { return nil }}
	shapes      = []shape{shapeCreate, shapePy, shapeProbe}
)

// expect runs req and checks that its output starts with want.
func expect(ctx context.Context, c *client.Client, id string, req api.ExecRequest, want string) error {
	res, err := c.Exec(ctx, id, req, client.ExecOptions{})
	if err != nil {
		return err
	}
	if !strings.HasPrefix(res.Stdout, want) {
		return fmt.Errorf("%v answered %q, want %q", req.Cmd.Argv, res.Stdout, want)
	}
	return nil
}

// measure creates a sandbox and runs the shape in it, returning the time
// from the create request to the last answer. The sandbox is returned
// even when the shape fails, for the caller to stop.
func (b *bencher) measure(ctx context.Context, sh shape) (time.Duration, string, error) {
	start := time.Now()
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 600})
	if err != nil {
		return 0, "", fmt.Errorf("create: %w", err)
	}
	if err := sh.run(ctx, b.c, sb.ID); err != nil {
		return 0, sb.ID, err
	}
	return time.Since(start), sb.ID, nil
}
