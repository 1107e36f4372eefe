// Package image builds and caches the root filesystems sandboxes boot from.
// A build is keyed by the hash of its recipe, lives in the shared cache
// directory, and is never written to once complete: every sandbox reads it
// as the lower layer of its own copy-on-write root.
//
// It must not import the rest of the platform.
package image

// DefaultName is the only image name the API accepts for now.
const DefaultName = "default"
