// Package hostcgroup is the host's cgroup layer for every backend: where a
// sandbox's cgroups live (<parent>/<id> in every v1 hierarchy, or in the
// one v2 hierarchy), how their counters read, how limits are set, and how
// they are removed with whatever is left in them. gVisor's runsc makes its
// sandboxes' cgroups itself; a backend that starts its own processes (the
// microVM's QEMU) makes them with Create and moves the process in with Add.
//
// It imports nothing of this module.
package hostcgroup
