// Package manager runs the lifecycle of sandboxes on one host: it validates
// create options, admits sandboxes while they fit the host (CPUs, memory,
// disk quotas), starts them on a backend, keeps their records in the store,
// ends leases and retention (the reaper), and on start reattaches or ends
// what an earlier server left.
//
// Every lifecycle operation on one sandbox holds that sandbox's lock
// (locks.go), whatever its state, and re-reads the record once it has it.
//
// It must not import the HTTP layer; it implements the interface the HTTP
// layer declares.
package manager
