// Package server assembles one withruntime server: the embedded store in
// the data dir, the admin key, the backend, the manager and the HTTP API,
// and runs it until its context ends.
//
// It is the only package that knows every other one, and it names no
// backend: it imports internal/backend/all, whose backends register
// themselves (sandbox.Registration), and chooses among the registry
// (isolation.go). Nothing imports it but the commands (withruntime, bench)
// and the conformance suite.
package server
