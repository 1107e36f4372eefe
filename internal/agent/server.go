package agent

import (
	"errors"
	"github.com/withruntime/withruntime/api"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// closeWait bounds how long Close waits for killed processes to end.
const closeWait = 5 * time.Second

// Config says whom commands run as and where the workspace is.
type Config struct {
	// BaseEnv is every command's environment before the request's own.
	BaseEnv map[string]string
	// UID and GID run commands and own the files and directories the agent
	// makes.
	UID, GID int
	// Home is the sandbox user's home, the default of HOME.
	Home string
	// Workspace is the default cwd and the root of relative paths.
	Workspace string
	// DefaultUser is whom a request that names no user runs as:
	// api.UserDefault ("" means it) or api.UserRoot (a template's).
	DefaultUser string
}

// DefaultConfig is the configuration of a sandbox made from the project's
// images: user "user" (1000:1000) owning /workspace.
func DefaultConfig() Config {
	return Config{
		BaseEnv: map[string]string{
			"PATH":    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"LANG":    "C.UTF-8",
			"HOME":    "/home/user",
			"USER":    "user",
			"LOGNAME": "user",
		},
		UID:       1000,
		GID:       1000,
		Home:      "/home/user",
		Workspace: "/workspace",
	}
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case c.UID < 0 || c.GID < 0:
		return errors.New("uid and gid must not be negative")
	case !filepath.IsAbs(c.Workspace):
		return errors.New("workspace must be an absolute path")
	case c.Home != "" && !filepath.IsAbs(c.Home):
		return errors.New("home must be an absolute path")
	case c.DefaultUser != "" && c.DefaultUser != api.UserDefault && c.DefaultUser != api.UserRoot:
		return errors.New("the default user must be " + api.UserDefault + " or " + api.UserRoot)
	}
	return nil
}

// Server is the agent's HTTP handler.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	procs  *procTable
	reaper *orphanReaper // nil unless ReapOrphans was called
	code   *codeTable

	envMu  sync.RWMutex
	ownEnv map[string]string // set by PUT /env, over cfg.BaseEnv

	// ports counts the port connections open (ports.go).
	ports portConns
	// suspend is set while the link is suspended (suspend.go).
	suspend suspending
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for cfg. Call cfg.Validate first.
func New(cfg Config) *Server {
	cfg.Workspace = filepath.Clean(cfg.Workspace)
	s := &Server{cfg: cfg, mux: http.NewServeMux(), procs: newProcTable(maxProcs), code: newCodeTable()}
	s.routes()
	return s
}

func (s *Server) routes() {
	s.handle("GET /healthz", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	})
	s.handle("POST /exec", s.handleExec)
	s.handle("GET /processes", s.handleProcessList)
	s.handle("GET /processes/{pid}", s.handleProcessGet)
	s.handle("POST /processes/{pid}/kill", s.handleProcessKill)
	s.handle("POST /processes/{pid}/stdin", s.handleProcessStdin)
	s.handle("GET /processes/{pid}/stream", s.handleProcessStream)
	s.handle("POST /processes/{pid}/resize", s.handleProcessResize)
	s.handle("GET /files", s.handleRead)
	s.handle("PUT /files", s.handleWrite)
	s.handle("DELETE /files", s.handleRemove)
	s.handle("GET /files/list", s.handleList)
	s.handle("GET /files/stat", s.handleStat)
	s.handle("POST /files/mkdir", s.handleMkdir)
	s.handle("GET /archive", s.handleArchiveGet)
	s.handle("PUT /archive", s.handleArchivePut)
	s.handle("PUT /env", s.handleEnvPut)
	s.handle("GET /ports/{port}/connect", s.handlePortConnect)
	s.handle("GET /stats", s.handleStats)
	s.handle("POST /reseed", s.handleReseed)
	s.handle("POST /code", s.handleCode)
	s.handle("POST /contexts", s.handleContextCreate)
	s.handle("GET /contexts", s.handleContextList)
	s.handle("POST /contexts/{cid}/restart", s.handleContextRestart)
	s.handle("DELETE /contexts/{cid}", s.handleContextRemove)
	s.handle("/", func(w http.ResponseWriter, r *http.Request) error {
		return notFoundf("no route %s %s", r.Method, r.URL.Path)
	})
}

// handlerFunc is a handler whose error, if nothing was written yet, becomes
// the JSON error response.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	})
}

// ServeHTTP serves the agent's routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Close kills every running background process and its descendants and
// every code kernel, and waits (a few seconds at most) until they have
// ended.
func (s *Server) Close() {
	s.closeCode()
	procs := s.procs.list()
	for _, p := range procs {
		p.kill()
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-t.C:
			return
		}
	}
}

func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalidf("%s must be true or false, not %q", name, v)
	}
	return b, nil
}

func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalidf("%s must be a non-negative integer, not %q", name, v)
	}
	return n, nil
}
