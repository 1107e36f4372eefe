// Package e2bcompat serves the E2B API (control plane, envd on port 49983,
// the code interpreter on port 49999) for unmodified E2B clients.
//
// It is a translator and nothing more: every request becomes calls to
// withruntime's own public API, made in-process (package selfcall) with
// the caller's own key, so every rule of that API (keys, read-only keys,
// limits, billing, egress, secrets) applies unchanged and every E2B
// sandbox is a withruntime sandbox with the same id. The in-sandbox side
// carries no API key: it carries an access token that is the caller's key
// sealed under the server's secret for that one sandbox (token.go).
package e2bcompat
