package server

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/httpapi"
)

// previews is what the server opened for the preview URLs: the secret of
// their tokens (DATA/preview.key, made as e2b.key is), and the host
// form's own listener when Config.PreviewListen asks for one.
type previews struct {
	secret []byte
	domain string
	// port is the port the host form's URLs name: the preview
	// listener's, else the API's.
	port int
	l    *admission.Listener // nil without Config.PreviewListen
}

func openPreviews(cfg Config, dataDir string, api net.Listener) (*previews, error) {
	secret, err := dataSecret(filepath.Join(dataDir, "preview.key"))
	if err != nil {
		return nil, err
	}
	pv := &previews{secret: secret, domain: cfg.PreviewDomain, port: portOf(api.Addr())}
	if cfg.PreviewListen == "" {
		return pv, nil
	}
	limit, err := listenLimit(cfg)
	if err != nil {
		return nil, err
	}
	nl, err := net.Listen("tcp", cfg.PreviewListen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.PreviewListen, err)
	}
	pv.l = admission.Listen(nl, admission.ConnLimits{MaxConns: limit, Logger: cfg.Logger})
	pv.port = portOf(nl.Addr())
	return pv, nil
}

func (pv *previews) close() {
	if pv.l != nil {
		pv.l.Close()
	}
}

// route sends the API listener's requests for a preview host
// ("<port>-<id>.<domain>") to the host form, and the rest to next: the
// host form works on the API's address too, as the local daemon serves it.
func (pv *previews) route(next, api http.Handler) http.Handler {
	if pv.domain == "" {
		return next
	}
	preview := httpapi.PreviewHandler(api)
	suffix := "." + strings.ToLower(pv.domain)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if strings.HasSuffix(host, suffix) {
			preview.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func portOf(a net.Addr) int {
	_, p, _ := net.SplitHostPort(a.String())
	n, _ := strconv.Atoi(p)
	return n
}
