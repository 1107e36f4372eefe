// Package node is the node daemon's side of a many-host installation: the
// node RPC server (rpc.go), through which API servers reach this host's
// manager over mutual TLS, and the lease loop (lease.go), which keeps the
// node's entry in the store alive and fences the node's sandboxes while
// it cannot.
//
// An API server is the only caller: the RPC trusts the account it names,
// as the manager trusts httpapi in a single box. The listener's TLS
// configuration (clusterpki.NodeKey.ServerTLS) is what keeps anyone else out; as
// anyone may still connect, Serve bounds per source the connections that
// have not finished their handshake, never the connections as a whole
// (conns.go).
package node
