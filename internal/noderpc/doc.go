// Package noderpc is the contract between API servers and node daemons
// of a many-host installation: the paths and JSON bodies of the node's
// RPC (served by internal/node over mutual TLS) and the client API
// servers call it with (internal/cluster). It imports the api package
// (the error envelope), the domain, the service seam (the create request
// as the API edge converted it), the egress log's events (a sandbox's
// egress, answered from the node) and nothing of the server.
package noderpc
