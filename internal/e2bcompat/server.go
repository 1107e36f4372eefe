package e2bcompat

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/membudget"
	"github.com/withruntime/withruntime/internal/selfcall"
)

// The ports E2B clients address inside a sandbox.
const (
	EnvdPort        = "49983"
	InterpreterPort = "49999"
)

// The headers that route a request to a sandbox.
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
)

// baseURL is the address the in-process clients believe they talk to;
// nothing is dialed.
const baseURL = "http://withruntime.in-process"

// Config is what a Server translates to.
type Config struct {
	// API is withruntime's own API handler, called in-process. It must
	// not depend on the connection of the request it serves: the server
	// wraps it with admission.OnBehalf, which spares the outer connection
	// under the caller's account and counts the calls per account.
	API http.Handler
	// Secret (32 bytes) seals access tokens.
	Secret []byte
	// Domain, when set, routes Host "<port>-<id>.<Domain>" to sandboxes
	// and is returned to clients as the sandboxes' domain.
	Domain string
	Log    *slog.Logger
	// Memory bounds in sum what the layer holds of sandboxes' answers
	// (memory.go), shared with the API's budget; nil bounds only each
	// answer.
	Memory *membudget.Budget
	// Accounts names the account a key acts for (the server's is
	// httpapi.KeyAccounts), which the layer's bounds per account count
	// under; nil: each key counts as an account of its own, which a test
	// of one key may use, but no server.
	Accounts func(ctx context.Context, key string) (string, error)
	// Preview serves a request to port of sandbox id as the API's preview
	// URL's host form (the server's is httpapi.ServePreview over the API's
	// handler); nil: ports other than envd's and the interpreter's are
	// not served.
	Preview func(w http.ResponseWriter, r *http.Request, id string, port int)
	// UploadDir is where the files of template builds wait for their
	// build (templateuploads.go), emptied when the server starts; "" is a
	// new directory in the system's temporary one.
	UploadDir string
	// NoInternetByDefault gives a sandbox whose create says nothing of
	// the network none (serve --e2b-internet=false); by default it has the
	// internet, as on E2B.
	NoInternetByDefault bool
}

// Server serves the E2B API.
type Server struct {
	cfg    Config
	tokens *tokens
	// known are the access tokens handed out or opened (signedurls.go).
	known       knownTokens
	hc          *http.Client
	control     *http.ServeMux
	envd        *http.ServeMux
	interpreter *http.ServeMux
	log         *slog.Logger
	builds      e2bBuilds
	uploads     *uploads
}

// Each feature file appends its registrar in init(), so that no file
// lists another's routes.
var envdRoutes, interpreterRoutes, controlRoutes []func(s *Server, mux *http.ServeMux)

// New makes a Server.
func New(cfg Config) (*Server, error) {
	if cfg.API == nil {
		return nil, errors.New("e2bcompat: no API handler")
	}
	t, err := newTokens(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Domain = strings.TrimSuffix(strings.ToLower(cfg.Domain), ".")
	up, err := newUploads(cfg.UploadDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		uploads: up,
		cfg:     cfg, tokens: t, log: cfg.Log,
		hc:      &http.Client{Transport: selfcall.Transport{Handler: cfg.API}},
		control: http.NewServeMux(), envd: http.NewServeMux(), interpreter: http.NewServeMux(),
	}
	for _, reg := range controlRoutes {
		reg(s, s.control)
	}
	for _, reg := range envdRoutes {
		reg(s, s.envd)
	}
	for _, reg := range interpreterRoutes {
		reg(s, s.interpreter)
	}
	s.control.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeE2BError(w, http.StatusNotImplemented, "withruntime's E2B API does not support "+r.Method+" "+r.URL.Path)
	})
	return s, nil
}

// ServeHTTP routes a request to a sandbox's port or to the control plane.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port, ok := s.route(r)
	if !ok {
		// A pre-signed /files URL routed by header names no sandbox: its
		// signature does (signedurls.go).
		sb, tok, signed, err := s.signedToken(r, "")
		if err != nil {
			writeError(w, err)
			return
		}
		if !signed {
			s.control.ServeHTTP(w, r)
			return
		}
		id, port = sb, EnvdPort
		r.Header.Set(headerAccessToken, tok)
	}
	var mux *http.ServeMux
	switch port {
	case EnvdPort:
		mux = s.envd
	case InterpreterPort:
		mux = s.interpreter
	default:
		s.servePort(w, r, id, port)
		return
	}
	r.Header.Set(headerSandboxID, id) // the host form carries it in the name
	// Every sandbox-side route is checked here, before its handler.
	sbx, err := s.sandbox(r)
	if err != nil {
		writeError(w, err)
		return
	}
	sbx.C = sbx.C.Reserving(s.reserveFor(sbx.acct))
	mux.ServeHTTP(w, r.WithContext(withSandbox(r.Context(), sbx)))
}

// route says whether r is for a sandbox, and which sandbox and port: by
// the E2b-Sandbox-Id header, else by Host "<port>-<id>.<Domain>".
func (s *Server) route(r *http.Request) (id, port string, ok bool) {
	if id = r.Header.Get(headerSandboxID); id != "" {
		port = r.Header.Get(headerSandboxPort)
		if port == "" {
			port = EnvdPort
		}
		return id, port, true
	}
	if s.cfg.Domain == "" {
		return "", "", false
	}
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, ok := strings.CutSuffix(host, "."+s.cfg.Domain)
	if !ok || strings.Contains(label, ".") {
		return "", "", false
	}
	port, id, ok = strings.Cut(label, "-")
	if !ok || port == "" || id == "" {
		return "", "", false
	}
	return id, port, true
}

// client is a withruntime client acting with key, in-process.
func (s *Server) client(key string) *client.Client {
	c, err := client.New(client.WithBaseURL(baseURL), client.WithAPIKey(key),
		client.WithHTTPClient(s.hc), client.WithUserAgent("withruntime-e2b"))
	if err != nil {
		panic(err) // the base URL is a constant
	}
	return c
}

// apiKey is the withruntime key an E2B key names. A key made in E2B's
// format ("e2b_" and hex digits) is itself; a withruntime key may also be
// given with "e2b_" in front ("e2b_wr_..."), for clients that check for the
// prefix, and is then the key after it. The shape decides, so each string
// names one key: hex digits never start with "wr_".
func apiKey(k string) string {
	k = strings.TrimSpace(k)
	if strings.HasPrefix(k, "e2b_wr_") {
		return strings.TrimPrefix(k, "e2b_")
	}
	return k
}
