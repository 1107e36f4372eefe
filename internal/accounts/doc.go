// Package accounts holds the rules of accounts, API keys and trial
// accounts, beside the manager and over internal/store: who may act for
// which account, which keys a key may make or remove and within which
// bounds (keys.go), what a trial account gets and how often one is
// handed out (trial.go). It has no HTTP in it: the API (internal/httpapi)
// decodes a request, asks the Service, and answers with what it returns.
// Its refusals are sandbox errors with their kinds (forbidden,
// rate_limited, ...), which the API turns into statuses and codes.
//
// It imports of this module only the domain (internal/sandbox, for error
// kinds), the store, billing (trial hours are counted by size) and the
// shared defaults (internal/defaults: the default size and concurrency).
package accounts
