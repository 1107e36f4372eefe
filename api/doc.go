// Package api holds the wire contract of withruntime's HTTP API as Go types:
// the JSON bodies the server, the Go client and the in-sandbox agent
// exchange. openapi.yaml beside it describes the same contract for other
// languages; a test in internal/httpapi checks that the two agree.
//
// It imports only the standard library and internal/envname (the rule for
// environment names, which the domain shares): the agent and the client
// depend on it and must stay small.
package api

// Version is the path prefix of every route of this contract.
const Version = "/v1"
