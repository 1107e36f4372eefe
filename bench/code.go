package main

import (
	"context"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// codeFigures measures the code interpreter in one sandbox: a new
// context's first cell, its kernel's start included, and cells on a warm
// kernel. The in-sandbox spawn of python3 (floor) is their baseline.
func (b *bencher) codeFigures(ctx context.Context, starts, cells int) (first, warm series, err error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 900})
	if err != nil {
		return nil, nil, err
	}
	defer b.done(ctx, []string{sb.ID})
	for i := 0; i < starts; i++ {
		cx, err := b.c.CreateContext(ctx, sb.ID, api.CreateContextRequest{})
		if err != nil {
			return nil, nil, err
		}
		d, err := b.cell(ctx, sb.ID, cx.ID)
		if err != nil {
			return nil, nil, err
		}
		first = append(first, d)
		if err := b.c.RemoveContext(ctx, sb.ID, cx.ID); err != nil {
			return nil, nil, err
		}
	}
	for i := 0; i < cells+1; i++ {
		d, err := b.cell(ctx, sb.ID, "")
		if err != nil {
			return nil, nil, err
		}
		if i > 0 { // the first one starts the default context's kernel
			warm = append(warm, d)
		}
	}
	return first, warm, nil
}

// cell runs `1 + 1` in context cid and checks its answer.
func (b *bencher) cell(ctx context.Context, id, cid string) (time.Duration, error) {
	start := time.Now()
	run, err := b.c.RunCode(ctx, id, api.CodeRequest{Code: "1 + 1", ContextID: cid}, client.CodeOptions{})
	if err != nil {
		return 0, err
	}
	if run.Error != nil || run.Text() != "2" {
		return 0, fmt.Errorf("cell 1 + 1 answered %q (error %+v)", run.Text(), run.Error)
	}
	return time.Since(start), nil
}
