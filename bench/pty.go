package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// ptyFigures measures a keystroke's round trip on a terminal: one byte
// typed into `cat` on a sandbox's terminal until the terminal's echo of it
// is read back (client, server, agent, the sandbox's line discipline and
// back), through the Go client as "sandbox shell" uses it.
func (b *bencher) ptyFigures(ctx context.Context, keys int) (series, error) {
	sb, err := b.c.CreateSandbox(ctx, api.CreateSandboxRequest{VCPUs: b.vcpus, MemoryMiB: b.mem, TimeoutSeconds: 900})
	if err != nil {
		return nil, err
	}
	defer b.done(ctx, []string{sb.ID})
	p, err := b.c.OpenPTY(ctx, sb.ID, client.PTYOptions{Cmd: []string{"cat"}})
	if err != nil {
		return nil, err
	}
	defer p.Kill(context.WithoutCancel(ctx))
	defer p.Close()
	echoes := make(chan []byte, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := p.Read(buf)
			if n > 0 {
				echoes <- bytes.Clone(buf[:n])
			}
			if err != nil {
				close(echoes)
				return
			}
		}
	}()
	var rt series
	for i := 0; i < keys+1; i++ {
		key := byte('a' + i%26)
		start := time.Now()
		if _, err := p.Write([]byte{key}); err != nil {
			return nil, err
		}
		for got := false; !got; {
			select {
			case b, ok := <-echoes:
				if !ok {
					return nil, fmt.Errorf("the terminal ended before echoing %q", key)
				}
				got = bytes.IndexByte(b, key) >= 0
			case <-time.After(30 * time.Second):
				return nil, fmt.Errorf("no echo of %q in 30s", key)
			}
		}
		if i > 0 { // the first one warms the connections
			rt = append(rt, time.Since(start))
		}
	}
	return rt, nil
}
