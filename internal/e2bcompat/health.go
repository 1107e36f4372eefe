package e2bcompat

import "net/http"

// envd's GET /health: 204 while the sandbox runs. ServeHTTP has checked
// the token and the sandbox before: one that does not run was answered
// 502 "was not found" there, which is what the clients look for.

func init() {
	envdRoutes = append(envdRoutes, func(s *Server, mux *http.ServeMux) {
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
			if _, err := s.sandbox(r); err != nil {
				writeError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
	})
}
