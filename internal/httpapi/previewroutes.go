package httpapi

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// The routes of a sandbox's preview settings: GET .../previews,
// GET|PUT .../previews/{port}, POST .../previews/revoke.

// previewView is how to reach port of rec, with a token good for
// expiresIn while the port is private.
func (s *server) previewView(rec *sandbox.Record, port int, expiresIn time.Duration) api.Preview {
	p := api.Preview{
		Port: port,
		Path: sandboxesPath + "/" + rec.ID + "/ports/" + strconv.Itoa(port) + "/",
	}
	if d := s.cfg.PreviewDomain; d != "" {
		p.Host = previewHost(port, rec.ID, d, s.cfg.PreviewPort)
		p.URL = "http://" + p.Host + "/"
	}
	var gen int64
	if rec.Preview != nil {
		p.Public = rec.Preview.IsPublic(port)
		gen = rec.Preview.Generation
	}
	if !p.Public {
		exp := s.now().Add(expiresIn).Truncate(time.Second)
		p.Token = s.previewTokens.seal(rec.ID, previewClaims{account: rec.Account, port: port, generation: gen, expires: exp})
		p.ExpiresAt = &exp
	}
	return p
}

// previewHost is the host form's host of port of sandbox id.
func previewHost(port int, id, domain string, listenPort int) string {
	h := strconv.Itoa(port) + "-" + id + "." + domain
	if listenPort != 0 && listenPort != 80 {
		h = net.JoinHostPort(h, strconv.Itoa(listenPort))
	}
	return h
}

func settingsView(rec *sandbox.Record) api.PreviewSettings {
	v := api.PreviewSettings{PublicPorts: []int{}}
	if rec.Preview != nil {
		v.PublicPorts = append(v.PublicPorts, rec.Preview.PublicPorts...)
		v.AllPublic = rec.Preview.AllPublic
	}
	return v
}

func (s *server) listPreviews(w http.ResponseWriter, r *http.Request, c caller) error {
	rec, err := s.cfg.Sandboxes.Get(r.Context(), c.account, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, settingsView(rec))
	return nil
}

func (s *server) getPreview(w http.ResponseWriter, r *http.Request, c caller) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	expiresIn := api.DefaultPreviewExpiry
	if v := r.URL.Query().Get("expires_in"); v != "" {
		n, err := strconv.Atoi(v)
		d := time.Duration(n) * time.Second
		if err != nil || d < api.MinPreviewExpiry || d > api.MaxPreviewExpiry {
			return sandbox.Errorf(sandbox.KindInvalid, "expires_in must be %d to %d seconds, not %q", int(api.MinPreviewExpiry.Seconds()), int(api.MaxPreviewExpiry.Seconds()), v)
		}
		expiresIn = d
	}
	rec, err := s.cfg.Sandboxes.Get(r.Context(), c.account, r.PathValue("id"))
	if err != nil {
		return err
	}
	if rec.State == sandbox.StateEnded {
		return sandbox.Errorf(sandbox.KindNotFound, "sandbox %s has ended (%s)", rec.ID, rec.EndReason)
	}
	writeJSON(w, http.StatusOK, s.previewView(rec, port, expiresIn))
	return nil
}

func (s *server) setPreview(w http.ResponseWriter, r *http.Request, c caller) error {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		return err
	}
	var req api.SetPreviewRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	ports, err := s.ports()
	if err != nil {
		return err
	}
	rec, err := ports.SetPreview(r.Context(), c.account, r.PathValue("id"), func(p *sandbox.Preview) error {
		p.PublicPorts = slices.DeleteFunc(p.PublicPorts, func(q int) bool { return q == port })
		if req.Public {
			if len(p.PublicPorts) >= maxPublicPorts {
				return sandbox.Errorf(sandbox.KindInvalid, "a sandbox has at most %d public ports", maxPublicPorts)
			}
			p.PublicPorts = append(p.PublicPorts, port)
			slices.Sort(p.PublicPorts)
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.previewView(rec, port, api.DefaultPreviewExpiry))
	return nil
}

// maxPublicPorts bounds a sandbox's public ports (its record stays small).
const maxPublicPorts = 64

// setPreviews is PUT .../previews: every port public, or only those
// made so one by one.
func (s *server) setPreviews(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.SetPreviewsRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	ports, err := s.ports()
	if err != nil {
		return err
	}
	rec, err := ports.SetPreview(r.Context(), c.account, r.PathValue("id"), func(p *sandbox.Preview) error {
		p.AllPublic = req.AllPublic
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, settingsView(rec))
	return nil
}

func (s *server) revokePreviews(w http.ResponseWriter, r *http.Request, c caller) error {
	ports, err := s.ports()
	if err != nil {
		return err
	}
	rec, err := ports.SetPreview(r.Context(), c.account, r.PathValue("id"), func(p *sandbox.Preview) error {
		p.Generation++
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, settingsView(rec))
	return nil
}

// PreviewHandler serves the host form of the preview URLs,
// {port}-{id}.{domain}, for the API handler h (NewServer's); any other
// host is not found. It panics if h is not NewServer's or has no
// PreviewDomain: a wiring mistake.
func PreviewHandler(h http.Handler) http.Handler {
	s := h.(*server)
	if s.cfg.PreviewDomain == "" {
		panic("httpapi: PreviewHandler without PreviewDomain")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveWith(w, r, func(w http.ResponseWriter, r *http.Request) {
			t, ok := previewTargetOf(r.Host, s.cfg.PreviewDomain)
			if !ok {
				writeError(w, r, sandbox.Errorf(sandbox.KindNotFound, "no preview at %q: preview hosts are PORT-ID.%s", r.Host, s.cfg.PreviewDomain))
				return
			}
			infoFrom(r.Context()).sandboxID = t.id
			s.servePreview(w, r, t)
		})
	})
}

// previewTargetOf reads a host form's host name.
func previewTargetOf(host, domain string) (previewTarget, bool) {
	host = strings.ToLower(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, ok := strings.CutSuffix(host, "."+strings.ToLower(domain))
	if !ok || strings.Contains(label, ".") {
		return previewTarget{}, false
	}
	p, id, ok := strings.Cut(label, "-")
	if !ok || id == "" {
		return previewTarget{}, false
	}
	port, err := parsePort(p)
	if err != nil {
		return previewTarget{}, false
	}
	return previewTarget{id: id, port: port}, true
}

// ServePreview serves r as a request to port of sandbox id in the host
// form (the path and Host as they are), for the API handler h
// (NewServer's): the E2B layer's sandbox hosts other than envd's. It
// panics if h is not NewServer's: a wiring mistake.
func ServePreview(h http.Handler, w http.ResponseWriter, r *http.Request, id string, port int) {
	s := h.(*server)
	s.serveWith(w, r, func(w http.ResponseWriter, r *http.Request) {
		infoFrom(r.Context()).sandboxID = id
		s.servePreview(w, r, previewTarget{id: id, port: port})
	})
}
