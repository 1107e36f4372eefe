// Package mcptools is the withruntime MCP server: an *mcp.Server (the
// official Go SDK) whose tools create, list, drive and stop sandboxes
// through the public Go client (package client). "withruntime mcp" serves
// it over stdio; the API server serves it at /v1/mcp, with a client that
// acts as the caller's key.
//
// The tools are the agent tools of the Python SDK (withruntime.tools) made
// explicit about their sandbox: every tool but sandbox_create and
// sandbox_list takes a sandbox_id, so there is no hidden "current sandbox"
// and several agents can share one server. Exec and file tools keep the
// agent tools' parameters, caps and results (see caps.go), and
// sandbox_run_code runs a notebook cell as runtime_run_code does. A path
// that is not there is data, as the agent tools return it ("not found:
// /workspace/x (no such file or directory)" as the file's content, or as a
// listing's one note). A platform error comes back as a tool error
// (IsError) whose text starts with the error's stable code, such as
// "not_found: ..." for a sandbox that is not there.
//
// The tools' descriptions and their arguments' are api/tools.json's, the
// text the SDKs' agent tools are generated from (describe.go); a test holds
// the listed tools to it.
//
// It imports only the client, the wire contract and the MCP SDK (with its
// JSON Schema package): it must build for every platform the CLI ships
// for, and must not import the server's packages.
package mcptools
