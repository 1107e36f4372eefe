// Package promexport is the server's Prometheus metrics (serve
// --metrics-listen): what the API served, what the manager holds and did,
// and what the egress services let through or refused. Labels carry
// routes, states, isolations, pools, outcomes and reasons, never an id,
// account, key or name a tenant chose, so that their number stays bounded
// and nothing secret is in them.
package promexport
