package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/withruntime/withruntime/api"
)

// tagVar marks every process of one exec, so that killing it also finds
// descendants that left its process group (setsid, double forks).
const tagVar = "WITHRUNTIME_EXEC_ID"

// launch is a validated exec request, ready to start.
type launch struct {
	cmd     api.Command
	argv    []string
	path    string // the executable; empty when notRunnable is set
	dir     string
	env     []string
	tag     string // tagVar=id
	stdin   string
	timeout time.Duration
	user    identity
	// keepStdin gives the process a pipe for stdin that stays open for
	// later writes (background processes only).
	keepStdin bool
	// notRunnable says why the command cannot start; it is reported like a
	// shell would, as an exit code and a line on stderr.
	notRunnable *notRunnable
}

// notRunnable is a command that could not start: exit code 127 when it was
// not found, 126 when it could not be executed.
type notRunnable struct {
	code int
	msg  string
}

func (e *notRunnable) Error() string { return e.msg }

func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	var login bool
	if req.Pty != nil {
		var err error
		if login, err = s.preparePty(&req); err != nil {
			return err
		}
	}
	l, err := s.prepare(req)
	if err != nil {
		return err
	}
	if req.Pty != nil {
		return s.startPty(w, l, *req.Pty, login)
	}
	if req.Background {
		return s.startBackground(w, l)
	}
	return s.runForeground(w, r, l)
}

// prepare checks req and works out what to run, where and with what
// environment.
func (s *Server) prepare(req api.ExecRequest) (*launch, error) {
	if req.Cmd.Empty() {
		return nil, invalidf("cmd is empty")
	}
	if req.TimeoutMs < 0 {
		return nil, invalidf("timeout_ms must not be negative")
	}
	for i, a := range req.Cmd.Argv {
		if err := checkNUL(fmt.Sprintf("cmd[%d]", i), a); err != nil {
			return nil, err
		}
	}
	if err := checkNUL("cmd", req.Cmd.Shell); err != nil {
		return nil, err
	}
	if err := checkEnv(req.Env); err != nil {
		return nil, err
	}
	user, err := s.identity(req.User)
	if err != nil {
		return nil, err
	}
	if req.KeepStdin && !req.Background {
		return nil, invalidf("keep_stdin needs background: a foreground command takes its stdin from the request")
	}
	if req.KeepStdin && req.Stdin != "" {
		return nil, invalidf("stdin and keep_stdin exclude each other: send the data with POST .../stdin")
	}
	// Stdin is data for a pipe, never a C string: NUL bytes are fine there.
	dir, err := s.workdir(req.Cwd)
	if err != nil {
		return nil, err
	}
	tag, err := newTag()
	if err != nil {
		return nil, err
	}
	l := &launch{
		cmd:     req.Cmd,
		argv:    req.Cmd.Argv,
		dir:     dir,
		tag:     tag,
		stdin:   req.Stdin,
		timeout: millis(req.TimeoutMs),
		user:    user,

		keepStdin: req.KeepStdin,
	}
	if req.Cmd.Argv == nil {
		l.argv = []string{"/bin/sh", "-c", req.Cmd.Shell}
	}
	var pathEnv string
	l.env, pathEnv = s.environAs(user.userEnv(), req.Env, tag)
	l.path, err = findExecutable(l.argv[0], pathEnv, dir)
	if err != nil {
		var nr *notRunnable
		if !errors.As(err, &nr) {
			return nil, err
		}
		l.notRunnable = nr
	}
	return l, nil
}

// workdir resolves the command's cwd; it must be an existing directory.
func (s *Server) workdir(cwd string) (string, error) {
	if cwd == "" {
		cwd = s.cfg.Workspace
	}
	dir, err := s.resolve(cwd)
	if err != nil {
		return "", invalidf("cwd: %v", err)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return "", invalidf("cwd %s does not exist", dir)
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EACCES):
		// The request's fault, not the agent's.
		return "", invalidf("cwd %.300s cannot be used: %v", dir, errors.Unwrap(err))
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", invalidf("cwd %s is not a directory", dir)
	}
	return dir, nil
}

// environ is environAs for the sandbox user.
func (s *Server) environ(extra map[string]string, tag string) ([]string, string) {
	return s.environAs(nil, extra, tag)
}

// environAs merges HOME, the base environment, the user's (root's HOME and
// USER), with that HOME's ~/.local/bin put first on PATH, the sandbox's
// own (PUT /env) and the request's, in that order,
// then adds the tag, which a request cannot override. It also returns the
// PATH the command is looked up in.
func (s *Server) environAs(user, extra map[string]string, tag string) ([]string, string) {
	m := map[string]string{}
	if s.cfg.Home != "" {
		m["HOME"] = s.cfg.Home
	}
	maps.Copy(m, s.cfg.BaseEnv)
	maps.Copy(m, user)
	withLocalBin(m)
	maps.Copy(m, s.sandboxEnv())
	maps.Copy(m, extra)
	delete(m, tagVar)
	env := make([]string, 0, len(m)+1)
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return append(env, tag), m["PATH"]
}

// millis is ms milliseconds, saturating rather than overflowing.
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

func newTag() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making exec id: %w", err)
	}
	return tagVar + "=" + hex.EncodeToString(b), nil
}

// findExecutable looks name up the way a shell does, in the command's own
// PATH rather than the agent's. A name with a slash is taken as it is
// (relative to dir); starting it reports what is wrong with it.
func findExecutable(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	denied := false
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&0o111 == 0 {
			denied = true
			continue
		}
		return p, nil
	}
	if denied {
		return "", &notRunnable{126, fmt.Sprintf("withruntime: %s: permission denied\n", name)}
	}
	return "", &notRunnable{127, fmt.Sprintf("withruntime: %s: command not found\n", name)}
}

// startFailure turns an error starting name into the shell's answer, or
// returns it as it is when the fault is not the command's.
func startFailure(name string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	switch errno {
	case syscall.ENOENT:
		return &notRunnable{127, fmt.Sprintf("withruntime: %s: %v\n", name, errno)}
	case syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.EISDIR, syscall.ENOTDIR:
		return &notRunnable{126, fmt.Sprintf("withruntime: %s: %v\n", name, errno)}
	}
	return fmt.Errorf("starting %s: %w", name, err)
}
