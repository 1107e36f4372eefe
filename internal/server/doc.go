// Package server assembles one withruntime server: the embedded store in
// the data dir, the admin key, the backend, the manager and the HTTP API,
// and runs it until its context ends.
//
// It is the only package that knows every other one; nothing imports it
// but the command.
package server
