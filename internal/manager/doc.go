// Package manager runs the lifecycle of sandboxes on one host: it validates
// create options, admits sandboxes while they fit the host, starts them on a
// backend, keeps their records in the store, ends leases and retention
// (the reaper), and on start reattaches or ends what an earlier server left.
//
// It must not import the HTTP layer; it implements the interface the HTTP
// layer declares.
package manager
