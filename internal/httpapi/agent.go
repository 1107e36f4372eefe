package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/admission"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// agentHost is the host of every URL sent to a Sandboxes.Agent round
// tripper; the round tripper routes by sandbox, not by host.
const agentHost = "sandbox-agent"

// exec checks the shape of an exec request before the agent sees it, adds
// the placeholders of the account's secrets to its environment, then
// forwards it. The agent answers with an ndjson stream of api.ExecEvent
// (or 201 and an api.Process when background), which is passed on as it
// comes.
func (s *server) exec(w http.ResponseWriter, r *http.Request, c caller) error {
	var req api.ExecRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	if req.Cmd.Empty() && req.Pty == nil {
		// A terminal's empty cmd is the user's login shell.
		return sandbox.Errorf(sandbox.KindInvalid, "cmd is required: a string or a non-empty array of strings")
	}
	if req.TimeoutMs < 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "timeout_ms must not be negative")
	}
	if err := api.CheckUser(req.User); err != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "%v, not %q", err, req.User)
	}
	if req.KeepStdin && !req.Background {
		return sandbox.Errorf(sandbox.KindInvalid, "keep_stdin needs background: a foreground command takes its stdin from the request")
	}
	if req.KeepStdin && req.Stdin != "" {
		return sandbox.Errorf(sandbox.KindInvalid, "stdin and keep_stdin exclude each other: send the data with POST .../processes/{pid}/stdin")
	}
	if req.Pty != nil {
		if err := req.Pty.Check(); err != nil {
			return sandbox.Errorf(sandbox.KindInvalid, "pty: %v", err)
		}
		if !req.Background {
			return sandbox.Errorf(sandbox.KindInvalid, "pty needs background: a terminal is attached to with GET .../processes/{pid}/stream and .../stdin, or use GET .../pty")
		}
		if req.Stdin != "" {
			return sandbox.Errorf(sandbox.KindInvalid, "stdin and pty exclude each other: send input with POST .../processes/{pid}/stdin")
		}
	}
	env, err := s.addPlaceholders(r.Context(), c.account, req.Env)
	if err != nil {
		return err
	}
	req.Env = env
	return s.forwardChecked(w, r, c, "/exec", req)
}

// forward passes a request on to the agent's route at suffix, its body
// bounded by limit.
func (s *server) forward(w http.ResponseWriter, r *http.Request, c caller, suffix string, limit bodyLimit) error {
	n := int64(-1)
	switch limit {
	case bodyJSON:
		n = s.cfg.MaxBodyBytes
	case bodyFile:
		n = s.cfg.MaxFileBytes
	case bodyStdin:
		n = api.MaxStdinBody
	}
	if strings.HasPrefix(suffix, "/files") || strings.HasPrefix(suffix, "/archive") {
		if u := r.URL.Query().Get("user"); api.CheckUser(u) != nil {
			return sandbox.Errorf(sandbox.KindInvalid, "query parameter user must be \"user\" or \"root\", not %q", u)
		}
	}
	if err := checkListQuery(suffix, r.URL.Query()); err != nil {
		return err
	}
	if n >= 0 {
		if r.ContentLength > n {
			return tooLarge(n)
		}
		r.Body = http.MaxBytesReader(w, r.Body, n)
	}
	// checkRequest made sure pid is digits only and cid a context id: they
	// need no escaping.
	path := strings.Replace(suffix, "{pid}", r.PathValue("pid"), 1)
	return s.proxy(w, r, c, strings.Replace(path, "{cid}", r.PathValue("cid"), 1))
}

// proxy streams the request to the sandbox's agent at agentPath and the
// answer back, flushing as bytes arrive and buffering neither body.
func (s *server) proxy(w http.ResponseWriter, r *http.Request, c caller, agentPath string) error {
	transport, err := s.cfg.Sandboxes.Agent(r.Context(), c.account, r.PathValue("id"))
	if err != nil {
		return err
	}
	requestID := infoFrom(r.Context()).id
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: "http", Host: agentHost, Path: agentPath, RawQuery: pr.In.URL.RawQuery}
			pr.Out.Host = ""
			// The platform's credentials never enter a sandbox.
			for _, h := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
				pr.Out.Header.Del(h)
			}
			askNoSwitch(pr.Out.Header)
			pr.Out.Header.Set("X-Request-Id", requestID)
		},
		ModifyResponse: func(resp *http.Response) error {
			if err := checkNoSwitch(resp); err != nil {
				return err
			}
			// The agent may be root's own program: of its headers only
			// those the contract has pass (no cookies, CORS or caching
			// rules on the API's origin), and the answer carries the
			// server's request id only.
			keepAgentHeaders(resp.Header)
			if k, ok := guardedStream(agentPath); ok {
				s.guardStream(r, c, resp, k)
			}
			return nil
		},
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      s.proxyLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A relayed 1xx cleared the answer's headers.
			w.Header().Set("X-Request-Id", requestID)
			s.agentError(w, r, c, err)
		},
	}
	rp.ServeHTTP(finalOnly{w}, r.WithContext(refuseSwitch(r.Context())))
	return nil
}

// agentHeaders are the answer headers of the agent's contract.
var agentHeaders = []string{"Content-Type", "Content-Length", "Cache-Control"}

func keepAgentHeaders(h http.Header) {
	kept := make(http.Header, len(agentHeaders))
	for _, k := range agentHeaders {
		if v, ok := h[k]; ok {
			kept[k] = v
		}
	}
	if ct := kept.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/") {
		kept.Set("Content-Type", "application/octet-stream") // never text/html on the API's origin
	}
	clear(h)
	for k, v := range kept {
		h[k] = v
	}
}

// agentError answers a request that never got an answer from the agent.
func (s *server) agentError(w http.ResponseWriter, r *http.Request, c caller, err error) {
	var tl *http.MaxBytesError
	switch {
	case admission.StalledBody(r.Context()) != nil:
		writeError(w, r, admission.StalledBody(r.Context()))
	case errors.As(err, &tl):
		writeError(w, r, sandbox.Wrap(sandbox.KindPayloadTooLarge, err, fmt.Sprintf("request body is larger than %d bytes", tl.Limit)))
	case errors.Is(err, errAgentSwitch):
		writeError(w, r, sandbox.Wrap(sandbox.KindInternal, err, "the sandbox's agent answered with a status the API does not relay (1xx or a protocol switch)"))
	case r.Context().Err() != nil:
		// The client went away: nobody reads an answer.
		infoFrom(r.Context()).err = err
	default:
		writeError(w, r, s.agentUnreachable(r, c, err))
	}
}

// agentUnreachable explains a failed round trip: most often the sandbox
// stopped (or its lease ran out) after Agent answered.
func (s *server) agentUnreachable(r *http.Request, c caller, err error) error {
	id := r.PathValue("id")
	rec, gerr := s.cfg.Sandboxes.Get(r.Context(), c.account, id)
	if gerr == nil && rec.State == sandbox.StateRunning && !rec.LeaseEndsAt.IsZero() && time.Now().After(rec.LeaseEndsAt) {
		// The reaper is ending it as the lease ran out; its record is
		// not written yet.
		return sandbox.Wrap(sandbox.KindLeaseEnded, err, fmt.Sprintf("sandbox %s ended: its lease ran out", id))
	}
	if gerr == nil && rec.State != sandbox.StateRunning {
		if rec.EndReason == sandbox.EndLeaseEnded {
			return sandbox.Wrap(sandbox.KindLeaseEnded, err, fmt.Sprintf("sandbox %s ended: its lease ran out", id))
		}
		return sandbox.Wrap(sandbox.KindConflict, err, fmt.Sprintf("sandbox %s is %s", id, rec.State))
	}
	return sandbox.Wrap(sandbox.KindInternal, err, "could not reach the sandbox's agent")
}
