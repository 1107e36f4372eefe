package mcptools

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// CreateInput is sandbox_create's arguments: a size, a lease, a network
// policy, an isolation and a template, each taking the server's default
// when absent.
type CreateInput struct {
	VCPUs          int           `json:"vcpus,omitempty"`
	MemoryMiB      int           `json:"memory_mib,omitempty"`
	DiskGiB        int           `json:"disk_gib,omitempty"`
	TimeoutSeconds int           `json:"timeout_seconds,omitempty"`
	Network        *NetworkInput `json:"network,omitempty"`
	Isolation      string        `json:"isolation,omitempty"`
	Template       string        `json:"template,omitempty"`
}

// NetworkInput is a sandbox's network policy.
type NetworkInput struct {
	Internet bool     `json:"internet"`
	Allow    []string `json:"allow,omitempty"`
}

// CreateOutput is the new sandbox.
type CreateOutput struct {
	ID      string      `json:"id" jsonschema:"The new sandbox's id: pass it as sandbox_id to the other tools."`
	Sandbox api.Sandbox `json:"sandbox"`
}

// ListInput is sandbox_list's arguments: none.
type ListInput struct{}

// ListOutput is the caller's sandboxes that have not ended.
type ListOutput struct {
	Sandboxes []api.Sandbox `json:"sandboxes"`
}

// StopInput is sandbox_stop's arguments.
type StopInput struct {
	SandboxID string `json:"sandbox_id"`
}

// StopOutput is the stopped sandbox.
type StopOutput struct {
	Sandbox api.Sandbox `json:"sandbox"`
}

// ForkInput is sandbox_fork's arguments.
type ForkInput struct {
	SandboxID string `json:"sandbox_id"`
	// Count is a pointer so that an explicit 0 is refused, not read as 1.
	Count *int `json:"count,omitempty"`
}

// ForkOutput is the sandboxes a fork started.
type ForkOutput struct {
	IDs       []string      `json:"ids" jsonschema:"The new sandboxes' ids: pass each as sandbox_id to the other tools."`
	Sandboxes []api.Sandbox `json:"sandboxes"`
}

func (t tools) addSandboxTools(s *mcp.Server) {
	add(s, t, tool("sandbox_create", nil), create)
	add(s, t, tool("sandbox_list", &mcp.ToolAnnotations{ReadOnlyHint: true}), list)
	add(s, t, tool("sandbox_fork", nil), fork)
	add(s, t, tool("sandbox_stop", &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}), stop)
}

func create(ctx context.Context, c *client.Client, in CreateInput) (CreateOutput, error) {
	req := api.CreateSandboxRequest{VCPUs: in.VCPUs, MemoryMiB: in.MemoryMiB, TimeoutSeconds: in.TimeoutSeconds, Isolation: in.Isolation,
		Template: in.Template}
	if in.DiskGiB != 0 {
		req.DiskGiB = &in.DiskGiB
	}
	if in.Network != nil {
		req.Network = &api.Network{Internet: in.Network.Internet, Allow: in.Network.Allow}
	}
	// Not canceled with the call: a create cut short could leave a
	// sandbox nobody knows the id of (its lease still ends it).
	sbx, err := c.CreateSandbox(context.WithoutCancel(ctx), req)
	if err != nil {
		return CreateOutput{}, err
	}
	return CreateOutput{ID: sbx.ID, Sandbox: *sbx}, nil
}

func list(ctx context.Context, c *client.Client, _ ListInput) (ListOutput, error) {
	l, err := c.ListSandboxes(ctx)
	if err != nil {
		return ListOutput{}, err
	}
	if l == nil {
		l = []api.Sandbox{}
	}
	return ListOutput{Sandboxes: l}, nil
}

func stop(ctx context.Context, c *client.Client, in StopInput) (StopOutput, error) {
	if err := needID(in.SandboxID); err != nil {
		return StopOutput{}, err
	}
	sbx, err := c.StopSandbox(ctx, in.SandboxID)
	if err != nil {
		return StopOutput{}, err
	}
	return StopOutput{Sandbox: *sbx}, nil
}

func fork(ctx context.Context, c *client.Client, in ForkInput) (ForkOutput, error) {
	if err := needID(in.SandboxID); err != nil {
		return ForkOutput{}, err
	}
	count := 1
	if in.Count != nil {
		// The API reads a count of 0 as 1; the server refuses above 16.
		if count = *in.Count; count < 1 {
			return ForkOutput{}, invalid("count must be 1 to 16")
		}
	}
	// Not canceled with the call, as a create: the forks would run on with
	// ids nobody was told.
	res, err := c.Fork(context.WithoutCancel(ctx), in.SandboxID, count, false)
	if err != nil {
		return ForkOutput{}, err
	}
	out := ForkOutput{IDs: make([]string, 0, len(res.Sandboxes)), Sandboxes: res.Sandboxes}
	for _, sb := range res.Sandboxes {
		out.IDs = append(out.IDs, sb.ID)
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }
