// Package network makes and removes the host-side network plumbing of a
// sandbox: its own network namespace (and, with the egress work, the links
// and packet rules in it).
//
// It must not import the rest of the platform; it only knows paths and
// names.
package network
