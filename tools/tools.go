//go:build tools

// Package tools pins the versions of programs the project builds from Go
// modules (runsc from gVisor), so every build of them is the same.
package tools

import _ "gvisor.dev/gvisor/runsc"
