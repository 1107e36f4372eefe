// Package cluster tests a many-host installation end to end on one
// machine: a PostgreSQL store, three `withruntime node` daemons, each in a
// network namespace of its own on a bridge in 198.18.0.0/24 (reserved for
// benchmarking, routed nowhere), and two `withruntime serve --store` API
// servers in the root namespace that reach the nodes over the bridge. The
// tests speak the real HTTP API and break the real pieces: kill -9 of a
// node or an API server, a packet rule that cuts a node off the store.
//
// It needs root, runsc and the image (internal/testenv) and a PostgreSQL
// server (WITHRUNTIME_TEST_POSTGRES, a URL whose role may create
// databases; scripts/postgres.sh prints one). Outside CI a missing piece
// skips the tests; with CI=true it fails them.
package cluster
