package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/membudget"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// Defaults and bounds of Config. The account, key and trial bounds are
// internal/accounts' (accounts.DefaultAccountConcurrency, ...).
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxFileBytes = api.MaxFileBody
)

// Config is what the server is made of. Sandboxes and Store are required.
type Config struct {
	Sandboxes service.Sandboxes
	Store     Store
	// Secrets keeps the accounts' secrets; nil: the secrets routes answer
	// not_supported and commands get no placeholders.
	Secrets SecretStore
	// Templates is the template library; nil: the templates routes answer
	// not_supported.
	Templates Templates
	// Volumes are the accounts' named volumes; nil: the volumes routes,
	// and a create that mounts any, answer not_supported.
	Volumes Volumes
	// Logger gets one line per request; nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes bounds JSON request bodies (DefaultMaxBodyBytes when 0).
	MaxBodyBytes int64
	// MaxFileBytes bounds a single-file upload (DefaultMaxFileBytes when 0).
	MaxFileBytes int64
	// DefaultConcurrency is the concurrency shown for accounts that set
	// none (accounts.DefaultAccountConcurrency when 0). The manager must
	// enforce the same value.
	DefaultConcurrency int
	// Trial says whether and how POST /v1/trial hands out trial accounts,
	// and what every trial account may run (internal/accounts).
	Trial accounts.TrialConfig
	// DefaultSize is the size a create that names none gets (the
	// manager's; accounts.DefaultSize's fields for zero ones): a trial's
	// create without a size gets it, cut to the trial's.
	DefaultSize accounts.Size
	// MaxKeysPerAccount bounds the keys an account holds and those its
	// keys make in a day (accounts.DefaultMaxKeysPerAccount when 0); the admin key
	// is not bound by it.
	MaxKeysPerAccount int
	// AgentMemory bounds in sum what the server holds of agents' answers
	// (agentmemory.go); nil bounds only each request.
	AgentMemory *membudget.Budget
	// PreviewSecret seals the preview tokens (PreviewSecretSize bytes);
	// nil: a random one, so that tokens die with the process.
	PreviewSecret []byte
	// PreviewDomain, when set, is the domain of the preview URLs' host
	// form ({port}-{id}.{domain}), served by PreviewHandler; PreviewPort
	// is the port its URLs name (0: none, the scheme's own).
	PreviewDomain string
	PreviewPort   int
	// Hooks keeps the webhooks and the audit log (webhooks.go); nil: their
	// routes answer not_supported and no change is audited.
	Hooks Hooks
	// CheckWebhookURL refuses a webhook URL the server must not deliver to
	// (internal/webhooks.Checker); nil: no webhook may be registered.
	CheckWebhookURL func(ctx context.Context, url string) error
	// Observe, when set, hears of every request once it is answered: its
	// route (the table's "METHOD PATTERN", "preview" for a preview URL,
	// "none" for no route), status and duration. No id, key or account:
	// what the server's metrics count.
	Observe func(route string, status int, d time.Duration)
}

// Validate reports what is missing or wrong in c.
func (c Config) Validate() error {
	switch {
	case c.Sandboxes == nil:
		return fmt.Errorf("httpapi: Config.Sandboxes is nil")
	case c.Store == nil:
		return fmt.Errorf("httpapi: Config.Store is nil")
	case c.MaxBodyBytes < 0 || c.MaxFileBytes < 0:
		return fmt.Errorf("httpapi: body limits must not be negative")
	case c.DefaultConcurrency < 0 || c.DefaultConcurrency > accounts.MaxAccountConcurrency:
		return fmt.Errorf("httpapi: DefaultConcurrency must be 0 to %d", accounts.MaxAccountConcurrency)
	case c.PreviewSecret != nil && len(c.PreviewSecret) != PreviewSecretSize:
		return fmt.Errorf("httpapi: PreviewSecret must be %d bytes", PreviewSecretSize)
	case c.PreviewPort < 0 || c.PreviewPort > 65535:
		return fmt.Errorf("httpapi: PreviewPort must be 0 to 65535")
	case c.MaxKeysPerAccount < 0:
		return fmt.Errorf("httpapi: MaxKeysPerAccount must not be negative")
	case c.DefaultSize.VCPUs < 0 || c.DefaultSize.MemoryMiB < 0 || c.DefaultSize.DiskGiB < 0:
		return fmt.Errorf("httpapi: DefaultSize must not be negative")
	}
	return c.Trial.Validate()
}

type server struct {
	cfg      Config
	log      *slog.Logger
	proxyLog *log.Logger // httputil.ReverseProxy's own complaints, into log
	mux      *http.ServeMux
	// accounts applies the rules of accounts, keys and trials.
	accounts *accounts.Service

	// mcp serves /v1/mcp (mcp.go), made on first use.
	mcpOnce sync.Once
	mcp     http.Handler

	// ptys counts the WebSockets attached to terminals (pty.go).
	ptys ptyAttachments

	// previewTokens seals and opens preview tokens, and previews counts
	// the proxied requests in flight (preview.go).
	previewTokens *previewTokens
	previews      previewCounts
	// now is the clock of token expiries.
	now func() time.Time
}

// NewServer returns the HTTP handler of the API. It panics when cfg does
// not validate: that is a wiring mistake, found at start.
func NewServer(cfg Config) http.Handler {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxFileBytes == 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	rules := accounts.New(accounts.Config{
		Store: cfg.Store, DefaultConcurrency: cfg.DefaultConcurrency, Trial: cfg.Trial,
		DefaultSize: cfg.DefaultSize, MaxKeysPerAccount: cfg.MaxKeysPerAccount,
	})
	// The defaults as the rules filled them in, for what the API shows.
	ac := rules.Config()
	cfg.DefaultConcurrency, cfg.Trial, cfg.DefaultSize, cfg.MaxKeysPerAccount = ac.DefaultConcurrency, ac.Trial, ac.DefaultSize, ac.MaxKeysPerAccount
	s := &server{
		cfg:      cfg,
		log:      cfg.Logger,
		proxyLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		mux:      http.NewServeMux(),
		accounts: rules,
		now:      time.Now,
	}
	var err error
	if s.previewTokens, err = newPreviewTokens(cfg.PreviewSecret); err != nil {
		panic(err) // Validate checked the size
	}
	for _, rt := range Routes() {
		s.mux.Handle(rt.Method+" "+rt.Pattern, s.route(rt))
	}
	// Any method: the app in the sandbox decides what it serves.
	s.mux.HandleFunc(sandboxPrefix+"/ports/{port}", s.previewByPath)
	s.mux.HandleFunc(sandboxPrefix+"/ports/{port}/{rest...}", s.previewByPath)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == MCPPattern {
			mcpMethodNotAllowed(w, r)
			return
		}
		writeError(w, r, sandbox.Errorf(sandbox.KindNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return s
}

// reqInfo is what the access log line says about a request; handlers fill
// it in as they learn.
type reqInfo struct {
	id        string
	sandboxID string
	account   string
	err       error
	// path, when set, is logged instead of the request's path.
	path string
	// route is the route that served the request (Config.Observe).
	route string
	// target, when set, is what the audit entry of the request names
	// (a key the request made); else its path's id or name (audit.go).
	target string
}

type infoKey struct{}

func infoFrom(ctx context.Context) *reqInfo {
	info, _ := ctx.Value(infoKey{}).(*reqInfo)
	return info
}

// ServeHTTP gives the request an id, serves it, and logs one line about it.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.serveWith(w, r, s.mux.ServeHTTP)
}

// serveWith is ServeHTTP with serve in the mux's place.
func (s *server) serveWith(w http.ResponseWriter, r *http.Request, serve http.HandlerFunc) {
	start := time.Now()
	r, done := admission.RequestStarted(r)
	defer done()
	info := &reqInfo{id: newRequestID()}
	w.Header().Set("X-Request-Id", info.id)
	sw := &statusWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))

	defer func() {
		p := recover()
		if p != nil && p != http.ErrAbortHandler {
			perr := fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			if sw.status == 0 {
				writeError(sw, r, perr)
				p = nil
			} else {
				// Part of the answer is out: only a broken stream tells the
				// client it is incomplete.
				p = http.ErrAbortHandler
			}
			info.err = perr
		}
		s.logRequest(r, sw, info, time.Since(start), p != nil)
		if p != nil {
			panic(p)
		}
	}()
	serve(sw, r)
}

func (s *server) logRequest(r *http.Request, sw *statusWriter, info *reqInfo, d time.Duration, aborted bool) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK // what net/http sends for a handler that wrote nothing
		if r.Context().Err() != nil {
			status = 499 // the client went away before an answer
		}
	}
	if s.cfg.Observe != nil {
		s.cfg.Observe(cmp.Or(info.route, "none"), status, d)
	}
	level := slog.LevelInfo
	if status >= 500 || aborted {
		level = slog.LevelError
	}
	attrs := []slog.Attr{
		slog.String("request_id", info.id),
		slog.String("method", r.Method),
		slog.String("path", cmp.Or(info.path, r.URL.Path)),
		slog.Int("status", status),
		slog.Duration("duration", d),
		slog.Int64("bytes", sw.bytes),
	}
	if info.sandboxID != "" {
		attrs = append(attrs, slog.String("sandbox_id", info.sandboxID))
	}
	if info.account != "" {
		attrs = append(attrs, slog.String("account", info.account))
	}
	if aborted {
		attrs = append(attrs, slog.Bool("aborted", true))
	}
	if info.err != nil {
		attrs = append(attrs, slog.String("error", info.err.Error()))
	}
	s.log.LogAttrs(context.WithoutCancel(r.Context()), level, "request", attrs...)
}

// route wraps a route's handler with auth and the checks every route shares.
func (s *server) route(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoFrom(r.Context())
		info.route = rt.Method + " " + rt.Pattern
		info.sandboxID = r.PathValue("id")
		if name := r.PathValue("name"); name != "" && !(api.EnvName(name) && len(name) <= 128) {
			// Not a secret's name: perhaps its value, given in the wrong place.
			info.path = rt.Pattern
		}
		var c caller
		if !rt.Public {
			var err error
			if c, err = s.authenticate(r, rt); err != nil {
				writeError(w, r, err)
				return
			}
			info.account = c.account
			if err := admission.RequestAuthorized(r.Context(), w, c.account); err != nil {
				writeError(w, r, err)
				return
			}
			if rt.Admin && c.kind != store.KeyAdmin {
				writeError(w, r, sandbox.Errorf(sandbox.KindForbidden, "only the admin key can %s %s", r.Method, r.URL.Path))
				return
			}
			if rt.Mutating && !c.canChange() {
				writeError(w, r, sandbox.Errorf(sandbox.KindForbidden, "this key is read-only: it cannot %s %s", r.Method, r.URL.Path))
				return
			}
		}
		if err := checkRequest(r); err != nil {
			writeError(w, r, err)
			return
		}
		if err := rt.handler(s, w, r, c); err != nil {
			// A stalled body is the cause, whatever its reader made of it.
			writeError(w, r, cmp.Or(admission.StalledBody(r.Context()), err))
			return
		}
		s.audit(w, r, rt, c)
	})
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// statusWriter records what was answered, for the access log. Unwrap lets
// http.ResponseController (and so httputil.ReverseProxy) flush through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TrialConfig and Size are the types of Config's trial and size fields,
// which internal/accounts defines with their defaults; named here too so
// that the server's configuration can spell them as the API's.
type (
	TrialConfig = accounts.TrialConfig
	Size        = accounts.Size
)
