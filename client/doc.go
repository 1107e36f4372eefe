// Package client is the Go client of withruntime's HTTP API: create
// sandboxes, run commands in them with their output streamed as it is
// produced, move files and whole directories in and out, and stop them;
// make templates (a snapshot of a sandbox's files, or an image archive)
// and start sandboxes from them (api.CreateSandboxRequest.Template).
//
//	c, err := client.New() // WITHRUNTIME_BASE_URL and WITHRUNTIME_API_KEY
//	if err != nil { ... }
//	sbx, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{TimeoutSeconds: 600})
//	if err != nil { ... }
//	defer c.StopSandbox(context.WithoutCancel(ctx), sbx.ID)
//	res, err := c.Exec(ctx, sbx.ID, api.ExecRequest{Cmd: api.Command{Argv: []string{"python3", "-V"}}},
//		client.ExecOptions{Stdout: os.Stdout, Stderr: os.Stderr})
//
// Errors come in two kinds. What the server refused is an *APIError
// carrying one of the stable codes; match it with errors.Is and the
// sentinels (ErrNotFound, ErrLeaseEnded, ...). When the server cannot be
// reached, or a stream breaks before its end, the error is a
// *TransportError. A call whose context ends returns the context's error.
//
// The package imports only the standard library, the module's api
// package, internal/tarx (the tar extractor it shares with the sandbox
// agent, itself standard library only) and github.com/coder/websocket
// (DialPort's WebSocket; it has no dependencies of its own): programs
// embed it, and the CLI is a thin layer over it. It must import nothing
// else under internal/.
package client
