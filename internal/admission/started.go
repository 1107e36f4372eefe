package admission

import (
	"context"
	"net/http"
)

// Started serves h on a Listener's connections the way the API's own
// handler is served: once h runs, the request's headers are all in, so
// its connection stops counting header bytes (a body is not a header)
// and the body is bounded in idle time. For handlers other than the
// API's on a Listener (the E2B translator's), since the API's calls
// RequestStarted itself. The in-process API
// requests h makes through OnBehalf, with r's context, spare r's
// connection once their key is accepted.
func Started(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, done := RequestStarted(r)
		defer done()
		if c, _ := r.Context().Value(connKey{}).(*conn); c != nil {
			// For OnBehalf: ended before done makes c evictable again.
			o := &outerRequest{c: c}
			defer o.end()
			r = r.WithContext(context.WithValue(r.Context(), outerKey{}, o))
		}
		h.ServeHTTP(w, r)
	})
}
