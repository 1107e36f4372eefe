package cli

import (
	"context"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/mcptools"
)

const mcpAbout = `Serve the sandbox tools (sandbox_create, sandbox_list, sandbox_exec,
sandbox_run_code, sandbox_read_file, sandbox_write_file, sandbox_list_files,
sandbox_fork, sandbox_stop) to an MCP client over stdio: the client starts "withruntime mcp" and speaks
MCP on its stdin and stdout. The tools act on the server that other commands
use (WITHRUNTIME_BASE_URL, WITHRUNTIME_API_KEY, the local daemon), with
that key's permissions. A server reached over HTTP serves the same tools at
/v1/mcp.`

func (a *App) mcpLeaf() leaf {
	return leaf{use: "mcp", short: "serve the sandbox tools to an MCP client over stdio", about: mcpAbout,
		define: a.mcpServe}
}

// mcpServe runs until the MCP client closes stdin or a signal ends it.
// The server is found as for every command, once at the start (so that a
// wrong address fails at once, and the local daemon starts) and again for
// each tool call: the local daemon exits when idle, and the next call
// starts it again.
func (a *App) mcpServe(cmd *command, s streams) runFunc {
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 0 {
			return cmd.usageError(s, "unexpected argument %q", pos[0])
		}
		_, done, err := a.connect(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		done()
		clients := func(ctx context.Context, _ *mcp.CallToolRequest) (*client.Client, error) {
			c, done, err := a.connect(ctx)
			if err != nil {
				return nil, err
			}
			done()
			return c, nil
		}
		srv := mcptools.NewServerFor(clients, mcptools.Options{Version: a.version()})
		t := &mcp.IOTransport{Reader: io.NopCloser(s.stdin), Writer: nopWriteCloser{s.stdout}}
		if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil {
			report(s.stderr, &cliError{codeUnavailable, "mcp: " + err.Error()})
			return exitFailure
		}
		return exitOK
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
