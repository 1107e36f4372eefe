package e2bcompat

import (
	"net/http"
	"strconv"
)

// A request for a sandbox's port other than envd's and the interpreter's
// (E2B's getHost(port): Host "<port>-<id>.<domain>", or the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers) is a preview URL: it goes
// to the API's preview of that port (Config.Preview). E2B's traffic
// access token (the E2B-Traffic-Access-Token header) becomes the key it
// seals; without one the request goes with no credential, which the API
// lets through only to a public port (E2B's default, allowPublicTraffic,
// makes every port of the sandbox public at create). Neither the token
// nor E2B's routing headers reach the sandbox.
func (s *Server) servePort(w http.ResponseWriter, r *http.Request, id, port string) {
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		writeE2BError(w, http.StatusBadRequest, "invalid port "+strconv.Quote(port))
		return
	}
	if s.cfg.Preview == nil {
		writeE2BError(w, http.StatusBadGateway, "The sandbox "+id+": port "+port+" is not served (this server has no preview URLs)")
		return
	}
	out := r.Clone(r.Context())
	for _, h := range []string{headerSandboxID, headerSandboxPort, headerTrafficToken, headerAccessToken, "Authorization"} {
		out.Header.Del(h)
	}
	if tok := r.Header.Get(headerTrafficToken); tok != "" {
		key, err := s.openToken(id, tok)
		if err != nil {
			writeE2BError(w, http.StatusUnauthorized, "invalid traffic access token for sandbox "+id)
			return
		}
		out.Header.Set("Authorization", "Bearer "+key)
	}
	s.cfg.Preview(w, out, id, p)
}
