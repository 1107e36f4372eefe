package httpapi

import "net/http"

// Started serves h on a Listener's connections the way the API's own
// handler is served: once h runs, the request's headers are all in, so
// its connection stops counting header bytes (a body is not a header)
// and the body is bounded in idle time. For handlers other than
// NewServer's on a Listener (the E2B translator's).
func Started(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, done := requestStarted(r)
		defer done()
		h.ServeHTTP(w, r)
	})
}
