// Package httpapi is withruntime's HTTP server: routing, API-key auth,
// decoding and checking request bodies, forwarding agent routes to the
// in-sandbox agent, the routes of accounts, keys, usage and trial
// accounts, and the conversion of the API's create request into the
// domain's (createRequest), once, at this edge. Error kinds become HTTP
// statuses and stable codes through internal/service (Status, Public).
// The rules those routes apply (who may act for which account, which keys a key may make or remove, what a trial gets)
// are internal/accounts': the handlers decode, ask its Service, and
// answer. What clients may hold of the server (connections, header size
// and time, requests in progress per account) is internal/admission's:
// the server calls it once a request's headers are in and once its key is
// accepted.
//
// It serves the contract of package api (and api/openapi.yaml, which a test
// here loads and validates with kin-openapi and holds to the route table
// and the Go types). It decides nothing about sandboxes
// itself: lifecycle and network policy go through service.Sandboxes,
// which the manager and internal/cluster implement, secrets through
// SecretStore (the vault of internal/secrets), and API keys are looked up in internal/store. It must not import the
// manager, a backend or the CLI; the public client it imports only for the
// tools of /v1/mcp, which call this server in-process (deps_test.go).
package httpapi
