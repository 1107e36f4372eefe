package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

func Example() {
	ctx := context.Background()
	c, err := client.New() // WITHRUNTIME_BASE_URL, WITHRUNTIME_API_KEY
	if err != nil {
		log.Fatal(err)
	}
	sbx, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{
		TimeoutSeconds: 1800,
		Network:        &api.Network{Internet: true, Allow: []string{"api.openai.com"}},
	})
	if errors.Is(err, client.ErrSpendingLimitReached) {
		log.Fatal("over today's spending limit")
	}
	if err != nil {
		log.Fatal(err)
	}
	// Stop the sandbox even when ctx has ended.
	defer c.StopSandbox(context.WithoutCancel(ctx), sbx.ID)

	if _, err := c.UploadDir(ctx, sbx.ID, "./my_agents", "/workspace/my_agents"); err != nil {
		log.Fatal(err)
	}
	res, err := c.Exec(ctx, sbx.ID, api.ExecRequest{
		Cmd:       api.Command{Argv: []string{"python3", "manager.py", "task"}},
		Cwd:       "/workspace/my_agents",
		TimeoutMs: 1_200_000,
	}, client.ExecOptions{Stdout: os.Stdout}) // stdout streamed, stderr kept in res
	var te *client.TransportError
	switch {
	case errors.As(err, &te):
		log.Fatalf("lost the server: %v", err)
	case err != nil:
		log.Fatal(err) // an *APIError: what the server refused
	}
	fmt.Println(res.ExitCode, res.TimedOut, res.Stderr)
}
