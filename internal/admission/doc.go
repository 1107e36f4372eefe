// Package admission decides which clients' connections and requests an
// HTTP server takes, before and while their requests are served: a bound
// on open connections, the longest-waiting one without a request in
// progress making room for a newcomer (Listener); a bound on a request's
// line and headers (answered 431 in the API's error body), on a body
// that stalls and on an answer its client stops reading; and a share of
// requests in progress per account, counted for direct requests on their
// connection (RequestAuthorized) and for in-process ones by account
// (AccountSlots, OnBehalf).
//
// It knows nothing of routes, keys or sandboxes: the API (internal/httpapi)
// calls RequestStarted once a request's headers are in and
// RequestAuthorized once its key is accepted, and the E2B layer is served
// through Started and OnBehalf. Its refusals are sandbox errors, which the
// API turns into statuses and codes. It imports of this module only the
// wire contract (for the 431's body) and internal/sandbox (error kinds).
package admission
