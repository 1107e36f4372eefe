// Package promexport is the server's Prometheus metrics (serve and node
// --metrics-listen): what the API served, what the manager holds and did,
// what the egress services let through or refused, and on an API server
// of many hosts the store's health, the node registry and the
// installation's sandboxes. Labels carry routes, states, isolations,
// pools, outcomes, reasons and node ids (the operator's hosts), never a
// sandbox's id, an account, a key, an address or a name a tenant chose,
// so that their number stays bounded and nothing secret is in them.
package promexport
