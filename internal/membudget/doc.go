// Package membudget bounds, in sum, the memory the server holds of what
// sandboxes send it: the in-flight answers of their agents (JSON read
// whole, stream lines held until they end). Each request's own bound
// (a line, a body) says what one request can hold; a Budget says what all
// of a sandbox's, an account's and the server's requests hold together,
// so that neither many held requests of one sandbox nor many sandboxes of
// one account can take the server's memory.
//
// A Budget has three levels: the server's total, each account's share
// (at most a quarter of the total, so no single account can take it all)
// and each sandbox's. Reservations are refused at once past any level,
// never queued: the caller's request fails with a stable error and the
// memory it would have held is never allocated.
//
// It imports the standard library only, so the API, the E2B layer and the
// MCP tools can all share one Budget.
package membudget
