// Package service is the seam between withruntime's front doors and what
// runs sandboxes: the Sandboxes interface that the manager (one box, or
// one node) and internal/cluster (the API server of many hosts)
// implement, and that internal/httpapi and the node RPC (internal/node)
// call; the domain form of a create request (CreateRequest), into which
// the API's request is converted once, at the API edge; and what a client
// may read of an error (Public) with the one mapping of error kinds to
// HTTP statuses (Status).
//
// It sits beside the domain (internal/sandbox) and knows no wire: it must
// not import package api, a server or a handler (deps_test.go). net/http
// is imported for two things only: the agent seam hands out an
// http.RoundTripper (the in-sandbox agent speaks HTTP), and Status names
// the statuses every HTTP front door (the API, the node RPC) answers an
// error kind with.
package service
