// Package manager runs the lifecycle of sandboxes on one host: it validates
// create options, admits sandboxes while they fit the host (CPUs, memory,
// disk quotas), starts them on a backend, keeps their records in the store,
// ends leases and retention (the reaper), and on start reattaches or ends
// what an earlier server left.
//
// Every lifecycle operation on one sandbox holds that sandbox's lock
// (locks.go), whatever its state, and re-reads the record once it has it.
// Each is a span (trace.go; none unless Config.TracerProvider exports
// them), and it calls the backend only through m.backend() (backend.go),
// which makes each call a child span and bounds the boots under way at
// once (Config.MaxConcurrentBoots).
//
// On a store that many hosts share, a manager is one node (Config.Node):
// it acts on its own node's records only, the store admits every sandbox
// that becomes live against its account's concurrency, every record write
// is conditional on the version read (owned.go), and the node daemon
// fences, unfences and reconciles it around its lease (fence.go).
//
// It must not import the HTTP layer or the API's wire types (package
// api): it implements service.Sandboxes, and takes creates in the
// domain's form (service.CreateRequest), converted once at the API edge
// (deps_test.go).
package manager
