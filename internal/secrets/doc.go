// Package secrets is the vault of host-bound secrets: it checks a secret's
// name, host and value, seals the value with AES-256-GCM under a key kept
// in a file outside the database, keeps the sealed form in internal/store,
// and hands out two views: placeholders (what a sandbox's commands see in
// their environment, one per secret name) and, for the egress proxy only,
// the opened values (egress.Secrets).
//
// Values never appear in an error it returns, and it logs nothing. It
// imports the wire contract, the domain, the store and the egress types
// only: it must not import the HTTP server, the manager or a backend.
package secrets
