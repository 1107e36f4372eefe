// Package httpapi is withruntime's HTTP server: routing, API-key auth,
// decoding and checking request bodies, forwarding agent routes to the
// in-sandbox agent, accounts, keys, usage and trial accounts over
// internal/store, and the one place where error kinds become HTTP
// statuses and stable codes (Status). Its Listener bounds what clients
// hold of the server before a request is served: connections, header size
// and time.
//
// It serves the contract of package api (and api/openapi.yaml, which a test
// here holds to the route table). It decides nothing about sandboxes
// itself: lifecycle and network policy go through the Sandboxes interface,
// which the manager implements, secrets through SecretStore (the vault of
// internal/secrets), and keys through internal/store. It must not import the
// manager, a backend, the client or the CLI.
package httpapi
