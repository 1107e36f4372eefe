package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// RetentionEnder is the manager's end of a paused sandbox whose retention
// is over (manager.EndRetention): a stop with reason retention_ended.
type RetentionEnder interface {
	EndRetention(ctx context.Context, id string) (*sandbox.Record, error)
}

// State is what the RPC asks of the lease loop: the node's epoch, and
// whether the node is fenced (it serves no sandbox then).
type State interface {
	Epoch() int64
	Fenced() bool
}

// MaxBodyBytes bounds the JSON body of every RPC but the agent's, whose
// bodies the API server bounded already and streams.
const MaxBodyBytes = 1 << 20

// HeaderNodeError marks an agent-path answer that the node wrote itself
// (the agent was never reached), so that the caller can tell it from the
// agent's own answer.
const HeaderNodeError = "X-Withruntime-Node-Error"

// agentHost is the host of every URL sent to the manager's agent round
// tripper, as httpapi sends it; the round tripper routes by sandbox.
const agentHost = "sandbox-agent"

// Config is the RPC server's configuration.
type Config struct {
	Node string
	// Sandboxes is the node's manager: the methods of service.Sandboxes
	// that act on this node's sandboxes (reads go to the store, not to a
	// node).
	Sandboxes service.Acts
	State     State
	Logger    *slog.Logger
	// Volumes resolves the volumes a create mounts to this node's own,
	// claimed until release is called (nil: the node keeps none, and
	// refuses them).
	Volumes VolumeResolver
}

// VolumeResolver resolves the mounts an API server named (Name, Path,
// ReadOnly: whatever else it sent, a host dir above all, is not read) to
// this node's volumes, checked and claimed as on a single box; release
// once the create is done.
type VolumeResolver func(ctx context.Context, account string, ms []sandbox.VolumeMount) (_ []sandbox.VolumeMount, release func(), _ error)

type rpc struct {
	cfg      Config
	proxyLog *slog.Logger
}

// NewHandler serves the node RPC (internal/noderpc's paths) over cfg's
// Sandboxes.
func NewHandler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &rpc{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+noderpc.PathHealth, s.health)
	mux.HandleFunc("POST "+noderpc.PathCreate, s.handle(s.create))
	mux.HandleFunc("POST "+noderpc.PathOp, s.handle(s.op))
	mux.HandleFunc("PUT "+noderpc.PathNetwork, s.handle(s.network))
	mux.HandleFunc("GET "+noderpc.PathEgress, s.handle(s.egress))
	mux.HandleFunc(noderpc.PathAgent+"{path...}", s.handle(s.agent))
	mux.HandleFunc("POST "+noderpc.PathSnapshot, s.handle(s.snapshot))
	mux.HandleFunc("POST "+noderpc.PathFork, s.handle(s.fork))
	mux.HandleFunc("DELETE "+noderpc.PathDeleteSnapshot, s.handle(s.deleteSnapshot))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, sandbox.Errorf(sandbox.KindNotFound, "no route %s %s on the node", r.Method, r.URL.Path))
	})
	return mux
}

// errFenced is the answer to everything but a create while the node
// cannot renew its lease; a create gets capacity_exhausted, so that the
// API server tries another node.
var errFenced = sandbox.Errorf(sandbox.KindConflict, "this node is fenced: it cannot reach the store")

// handle answers h's error, if any, as the API's error envelope.
func (s *rpc) handle(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			if k, _ := service.Public(err); k == sandbox.KindInternal {
				s.cfg.Logger.Error("node rpc", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, err)
		}
	}
}

func writeError(w http.ResponseWriter, err error) {
	status, body := noderpc.ErrorAnswer(err)
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the status is sent: a failure is the caller gone
}

// decode reads r's JSON body, at most MaxBodyBytes, into v.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		var tl *http.MaxBytesError
		if errors.As(err, &tl) {
			return sandbox.Errorf(sandbox.KindPayloadTooLarge, "request body is larger than %d bytes", tl.Limit)
		}
		return sandbox.Errorf(sandbox.KindInvalid, "request body: %v", err)
	}
	return nil
}

func (s *rpc) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, noderpc.Health{Node: s.cfg.Node, Epoch: s.cfg.State.Epoch(), Fenced: s.cfg.State.Fenced()})
}

func (s *rpc) create(w http.ResponseWriter, r *http.Request) error {
	var req noderpc.CreateRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if s.cfg.State.Fenced() {
		return sandbox.Errorf(sandbox.KindCapacityExhausted, "node %s is fenced: it cannot reach the store", s.cfg.Node)
	}
	if len(req.Request.Volumes) > 0 {
		if s.cfg.Volumes == nil {
			return sandbox.Errorf(sandbox.KindNotSupported, "node %s keeps no volumes", s.cfg.Node)
		}
		ms, release, err := s.cfg.Volumes(r.Context(), req.Account, req.Request.Volumes)
		if err != nil {
			return err
		}
		defer release()
		req.Request.Volumes = ms
	}
	rec, err := s.cfg.Sandboxes.Create(r.Context(), req.Account, req.KeyID, req.Request)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, rec)
	return nil
}

func (s *rpc) op(w http.ResponseWriter, r *http.Request) error {
	var req noderpc.OpRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	id, sb := r.PathValue("id"), s.cfg.Sandboxes
	var call func() (*sandbox.Record, error)
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	// A reason is taken on a stop only, and only retention_ended (the
	// failure detector's removal of a lost node's shared checkpoint).
	if req.Reason != "" && (r.PathValue("op") != noderpc.OpStop || req.Reason != sandbox.EndRetentionEnded) {
		return sandbox.Errorf(sandbox.KindInvalid, "no reason %q for %s", req.Reason, r.PathValue("op"))
	}
	switch ctx := r.Context(); r.PathValue("op") {
	case noderpc.OpStop:
		call = func() (*sandbox.Record, error) { return sb.Stop(ctx, req.Account, id) }
		if req.Reason == sandbox.EndRetentionEnded {
			re, ok := sb.(RetentionEnder)
			if !ok {
				return sandbox.Errorf(sandbox.KindInvalid, "node %s cannot end a retention", s.cfg.Node)
			}
			call = func() (*sandbox.Record, error) { return re.EndRetention(ctx, id) }
		}
	case noderpc.OpPause:
		call = func() (*sandbox.Record, error) { return sb.Pause(ctx, req.Account, id) }
	case noderpc.OpResume:
		call = func() (*sandbox.Record, error) { return sb.Resume(ctx, req.Account, id) }
	case noderpc.OpExtend:
		call = func() (*sandbox.Record, error) { return sb.Extend(ctx, req.Account, id, timeout) }
	case noderpc.OpSetLease:
		call = func() (*sandbox.Record, error) { return sb.SetLease(ctx, req.Account, id, timeout) }
	default:
		return sandbox.Errorf(sandbox.KindNotFound, "no operation %q on the node", r.PathValue("op"))
	}
	if s.cfg.State.Fenced() {
		return errFenced
	}
	rec, err := call()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

func (s *rpc) network(w http.ResponseWriter, r *http.Request) error {
	var req noderpc.NetworkRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if s.cfg.State.Fenced() {
		return errFenced
	}
	rec, err := s.cfg.Sandboxes.SetNetwork(r.Context(), req.Account, r.PathValue("id"), req.Network)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

func (s *rpc) egress(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.State.Fenced() {
		return errFenced
	}
	ev, err := s.cfg.Sandboxes.Egress(r.Context(), r.URL.Query().Get("account"), r.PathValue("id"))
	if err != nil {
		return err
	}
	if ev == nil {
		ev = []egress.Event{}
	}
	writeJSON(w, http.StatusOK, ev)
	return nil
}

// dropHeaders never reach an agent: credentials, the RPC's own header, and
// what asks for a protocol switch or an informational answer.
var dropHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", noderpc.HeaderAccount, "Upgrade", "Connection", "Expect"}

// agent streams the request to the sandbox's agent and its answer back,
// buffering neither body and flushing as bytes come.
func (s *rpc) agent(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.State.Fenced() {
		return nodeError(w, errFenced)
	}
	rt, err := s.cfg.Sandboxes.Agent(r.Context(), r.Header.Get(noderpc.HeaderAccount), r.PathValue("id"))
	if err != nil {
		return nodeError(w, err)
	}
	// The agent's path as the caller escaped it: everything after
	// /node/v1/sandboxes/{id}/agent/.
	parts := strings.SplitN(r.URL.EscapedPath(), "/", 7)
	if len(parts) < 7 {
		return nodeError(w, sandbox.Errorf(sandbox.KindNotFound, "no agent path"))
	}
	rawPath := "/" + parts[6]
	path, err := url.PathUnescape(rawPath)
	if err != nil {
		return nodeError(w, sandbox.Errorf(sandbox.KindInvalid, "agent path: %v", err))
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: "http", Host: agentHost, Path: path, RawPath: rawPath, RawQuery: pr.In.URL.RawQuery}
			pr.Out.Host = ""
			for _, h := range dropHeaders {
				pr.Out.Header.Del(h)
			}
		},
		Transport:     rt,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the caller went away: nobody reads an answer
			}
			s.cfg.Logger.Debug("node rpc: agent unreachable", "sandbox", r.PathValue("id"), "err", err)
			nodeError(w, sandbox.Wrap(sandbox.KindInternal, err, "could not reach the sandbox's agent"))
		},
	}
	rp.ServeHTTP(w, r)
	return nil
}

// nodeError answers an agent-path request that the agent never saw.
func nodeError(w http.ResponseWriter, err error) error {
	w.Header().Set(HeaderNodeError, "1")
	writeError(w, err)
	return nil
}

// Bounds of the RPC's connections. The callers are API servers of the
// installation, but a node still holds nothing open for a caller that
// stalls: headers must come quickly, and an idle connection closes.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
)

// NewServer is the http.Server of the RPC: h on tlsConfig
// (clusterpki.NodeKey.ServerTLS: TLS 1.3, h2, API callers only), with the bounds
// above. Serve it with Serve.
func NewServer(h http.Handler, tlsConfig *tls.Config, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		// Refused handshakes (callers without the API's certificate) are
		// logged at debug level only: anyone can cause them.
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
}
