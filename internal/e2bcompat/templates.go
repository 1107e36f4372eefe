package e2bcompat

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// E2B's template build API (e2b-protocol §5), as its v2 builder calls it:
// POST /v3/templates names the build; GET .../files/{hash} says whether a
// copy step's files are held and where to upload them; PUT there uploads
// them; POST /v2/templates/{id}/builds/{build} starts the build with its
// steps; GET .../status polls its state and log. The build itself is
// withruntime's (POST /v1/templates), made with the caller's key when it
// starts: every step runs in a sandbox of the key's account.

func init() {
	controlRoutes = append(controlRoutes, func(s *Server, mux *http.ServeMux) {
		mux.HandleFunc("POST /v3/templates", s.withKey(s.requestBuild))
		mux.HandleFunc("GET /templates/{template}/files/{hash}", s.withKey(s.fileUpload))
		mux.HandleFunc("PUT /templates/{template}/files/{hash}", s.putFiles)
		mux.HandleFunc("POST /v2/templates/{template}/builds/{build}", s.withKey(s.startBuild))
		mux.HandleFunc("GET /templates/{template}/builds/{build}/status", s.withKey(s.buildStatus))
		mux.HandleFunc("GET /templates/aliases/{alias}", s.withKey(s.aliasExists))
	})
}

const (
	// maxPendingBuilds bounds the builds an account has named and not yet
	// started; maxBuilds all that the server remembers.
	maxPendingBuilds = 32
	maxBuilds        = 4096
	// buildMemory is how long a build is remembered after it was named.
	buildMemory = 24 * time.Hour
	// maxBuildStartBody bounds a build start's steps (withruntime's own
	// bound on a build specification).
	maxBuildStartBody = 8 << 20
	// maxStatusLogs is the most log entries one status call answers (E2B's
	// own page).
	maxStatusLogs = 100
)

// e2bBuild is a build an E2B client named, and withruntime's build once
// it started.
type e2bBuild struct {
	id, templateID, ref, account string
	cpu, memoryMiB               int
	at                           time.Time
	// started is withruntime's build id; starting is set while the start
	// is under way.
	started  string
	starting bool
}

// e2bBuilds are the builds the server remembers, by E2B build id.
type e2bBuilds struct {
	mu sync.Mutex
	m  map[string]*e2bBuild
}

// add remembers b, within the bounds.
func (bs *e2bBuilds) add(b *e2bBuild) error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.m == nil {
		bs.m = map[string]*e2bBuild{}
	}
	pending := 0
	var oldest *e2bBuild
	for id, o := range bs.m {
		if time.Since(o.at) > buildMemory {
			delete(bs.m, id)
			continue
		}
		if o.account == b.account && o.started == "" {
			pending++
		}
		if oldest == nil || o.at.Before(oldest.at) {
			oldest = o
		}
	}
	if pending >= maxPendingBuilds {
		return &Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("this account has %d builds named and not started: start them, or wait a day", pending)}
	}
	if len(bs.m) >= maxBuilds && oldest != nil {
		delete(bs.m, oldest.id)
	}
	bs.m[b.id] = b
	return nil
}

// get is account's build id of template; a build of another account is
// as unknown as one never named.
func (bs *e2bBuilds) get(account, template, id string) (e2bBuild, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[id]
	if b == nil || b.account != account || b.templateID != template {
		return e2bBuild{}, &Error{Status: http.StatusNotFound, Message: "build " + id + " of template " + template + " not found"}
	}
	return *b, nil
}

// claim marks build id as starting; release ends that, with withruntime's
// build id when it started.
func (bs *e2bBuilds) claim(id string) error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[id]
	if b == nil || b.started != "" || b.starting {
		return &Error{Status: http.StatusConflict, Message: "build " + id + " has been started already"}
	}
	b.starting = true
	return nil
}

func (bs *e2bBuilds) release(id, started string) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b := bs.m[id]; b != nil {
		b.starting, b.started = false, started
	}
}

// newBuildID is a build id in E2B's form, a random UUID.
func newBuildID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// buildRequest is E2B's TemplateBuildRequestV3.
type buildRequest struct {
	Name          string   `json:"name"`
	Alias         string   `json:"alias"`
	Tags          []string `json:"tags"`
	TeamID        string   `json:"teamID"`
	CPUCount      int      `json:"cpuCount"`
	MemoryMB      int      `json:"memoryMB"`
	MinFreeDiskMB *int     `json:"minFreeDiskMb"`
}

// requestBuild is POST /v3/templates: a build of name (E2B's "name" or
// "name:tag", with more tags beside), to be started once its files are
// uploaded. A withruntime build makes one tag: more are refused.
func (s *Server) requestBuild(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	var req buildRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	name := req.Name
	if name == "" {
		name = req.Alias
	}
	if name == "" {
		return badBuild("name is required")
	}
	if req.CPUCount < 0 || req.MemoryMB < 0 {
		return badBuild("cpuCount and memoryMB are positive")
	}
	base, tag, _ := strings.Cut(name, ":")
	var tags []string
	for _, t := range append([]string{tag}, req.Tags...) {
		if t != "" && !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	if len(tags) > 1 {
		return badBuild("withruntime builds one tag of a template at a time, got %s: build once per tag", strings.Join(tags, ", "))
	}
	ref := base
	if len(tags) == 1 {
		ref += ":" + tags[0]
	} else {
		tags = []string{"latest"}
	}
	if templates[base] || base == "default" {
		return badBuild("%q names the built-in image: give the template another name", base)
	}
	// The API checks the name's shape; a name not made yet is what a
	// first build has.
	if _, err := c.GetTemplate(r.Context(), ref); err != nil {
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != client.CodeNotFound {
			return err
		}
	}
	acct, err := s.account(r.Context(), key)
	if err != nil {
		return err
	}
	b := &e2bBuild{id: newBuildID(), templateID: base, ref: ref, account: acct, cpu: req.CPUCount, memoryMiB: req.MemoryMB, at: time.Now()}
	if err := s.builds.add(b); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{
		"templateID": base, "buildID": b.id, "public": false,
		"names": []string{base}, "aliases": []string{base}, "tags": tags,
	})
	return nil
}

// uploadScope is what an upload URL's token is sealed for: it holds the
// caller's key, for this template's files of this hash only.
func uploadScope(template, hash string) string { return "upload " + template + " " + hash }

// fileUpload is GET /templates/{template}/files/{hash}: whether the
// account holds these files, and the URL (with a token, as the client's
// upload carries no key) to upload them to.
func (s *Server) fileUpload(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	tpl, hash := r.PathValue("template"), r.PathValue("hash")
	if !filesHash.MatchString(hash) {
		return badBuild("a files hash is 64 hex digits")
	}
	acct, err := s.account(r.Context(), key)
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: "/templates/" + tpl + "/files/" + hash,
		RawQuery: url.Values{"token": {s.tokens.seal(uploadScope(tpl, hash), key)}}.Encode()}
	u.RawPath = "/templates/" + url.PathEscape(tpl) + "/files/" + hash
	writeJSON(w, http.StatusCreated, map[string]any{"present": s.uploads.present(acct, hash), "url": u.String()})
	return nil
}

// putFiles is the upload to the URL fileUpload gave: the token stands for
// the key, which must still be good.
func (s *Server) putFiles(w http.ResponseWriter, r *http.Request) {
	tpl, hash := r.PathValue("template"), r.PathValue("hash")
	if !filesHash.MatchString(hash) {
		writeError(w, badBuild("a files hash is 64 hex digits"))
		return
	}
	key, err := s.tokens.open(uploadScope(tpl, hash), r.URL.Query().Get("token"))
	if err != nil {
		writeE2BError(w, http.StatusUnauthorized, "this upload URL is not good: ask for the files' upload link again")
		return
	}
	if err := checkKey(r.Context(), s.client(key)); err != nil {
		writeError(w, err)
		return
	}
	acct, err := s.account(r.Context(), key)
	if err == nil {
		err = s.uploads.put(acct, hash, r.Body)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// buildOf is the key's account and the build the path names.
func (s *Server) buildOf(r *http.Request, key string) (string, e2bBuild, error) {
	acct, err := s.account(r.Context(), key)
	if err != nil {
		return "", e2bBuild{}, err
	}
	b, err := s.builds.get(acct, r.PathValue("template"), r.PathValue("build"))
	return acct, b, err
}

// startBuild is POST /v2/templates/{template}/builds/{build}: withruntime's
// build of the steps, with the uploaded files as its context, which the
// build takes (they are dropped once it has them).
func (s *Server) startBuild(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	acct, b, err := s.buildOf(r, key)
	if err != nil {
		return err
	}
	var start buildStart
	if err := decodeBodyMax(r, &start, maxBuildStartBody); err != nil {
		return err
	}
	spec, copies, err := start.spec(b.ref, b.cpu, b.memoryMiB)
	if err != nil {
		return err
	}
	if err := s.builds.claim(b.id); err != nil {
		return err
	}
	started := ""
	defer func() { s.builds.release(b.id, started) }()

	var body io.Reader
	var ctxErr error
	done := make(chan struct{})
	pr, pw := io.Pipe()
	if len(copies) > 0 {
		body = pr
		go func() {
			defer close(done)
			ctxErr = writeContext(pw, s.uploads, acct, copies)
			pw.CloseWithError(ctxErr)
		}()
	} else {
		close(done)
	}
	wb, err := c.BuildTemplate(r.Context(), spec, body)
	pr.CloseWithError(errors.New("the build request ended"))
	<-done
	var e *Error
	if errors.As(ctxErr, &e) {
		return e // the uploads' fault, not the API's
	}
	if err != nil {
		return err
	}
	started = wb.ID
	var hashes []string
	for _, cp := range copies {
		hashes = append(hashes, cp.hash)
	}
	s.uploads.drop(acct, hashes)
	s.log.Info("e2b: template build started", "build_id", b.id, "withruntime_build", wb.ID, "template", b.ref)
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// logEntry is E2B's BuildLogEntry.
type logEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

// levels orders E2B's log levels, for the status call's level filter.
var levels = map[string]int{"debug": 0, "info": 1, "warn": 2, "error": 3}

// buildStatus is GET /templates/{template}/builds/{build}/status: E2B's
// state of the build (waiting until started, building, ready or error)
// and its log from logsOffset, a page at a time.
func (s *Server) buildStatus(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	_, b, err := s.buildOf(r, key)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	offset, err := queryInt(q, "logsOffset", 0)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit", maxStatusLogs)
	if err != nil {
		return err
	}
	limit = min(limit, maxStatusLogs)
	minLevel := 0
	if l := q.Get("level"); l != "" {
		var ok bool
		if minLevel, ok = levels[l]; !ok {
			return badBuild("level is debug, info, warn or error")
		}
	}
	out := map[string]any{"buildID": b.id, "templateID": b.templateID, "status": "waiting", "logs": []string{}, "logEntries": []logEntry{}}
	if b.started == "" {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	// The state first, then the log: a log read after an ended state has
	// all of it.
	wb, err := c.GetTemplateBuild(r.Context(), b.started)
	if err != nil {
		return err
	}
	var entries []logEntry
	err = c.TemplateBuildLogs(r.Context(), b.started, false, func(ev api.BuildLogEvent) error {
		if e, ok := entryOf(ev); ok && levels[e.Level] >= minLevel {
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if offset < len(entries) {
		entries = entries[offset:min(len(entries), offset+limit)]
	} else {
		entries = []logEntry{}
	}
	out["logEntries"] = entries
	switch wb.State {
	case "succeeded":
		out["status"] = "ready"
	case "failed":
		out["status"] = "error"
		reason := map[string]any{"message": "the build failed"}
		if wb.Error != nil {
			reason["message"] = wb.Error.Message + " (" + wb.Error.Code + ")"
		}
		if wb.Step > 0 {
			reason["step"] = strconv.Itoa(wb.Step)
		}
		out["reason"] = reason
	default:
		out["status"] = "building"
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// entryOf is a withruntime build log event as an E2B log entry.
func entryOf(ev api.BuildLogEvent) (logEntry, bool) {
	e := logEntry{Timestamp: ev.Time, Level: "info", Message: ev.Message}
	if ev.Step > 0 {
		e.Step = strconv.Itoa(ev.Step)
	}
	switch ev.Type {
	case api.BuildLogStep:
		e.Message = fmt.Sprintf("[builder %d/%d] %s", ev.Step, ev.Steps, ev.Message)
		if ev.Cached {
			e.Message = fmt.Sprintf("CACHED [builder %d/%d] %s", ev.Step, ev.Steps, ev.Message)
		}
	case api.BuildLogEnd:
		if ev.State == "failed" {
			e.Level = "error"
		}
	}
	if ev.Dropped > 0 {
		e.Level, e.Message = "warn", fmt.Sprintf("(%d lines of output dropped)", ev.Dropped)
	}
	return e, e.Message != ""
}

// queryInt is q's non-negative integer name, def when absent.
func queryInt(q url.Values, name string, def int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badBuild("%s is a non-negative integer", name)
	}
	return n, nil
}

// aliasExists is GET /templates/aliases/{alias}: 200 when the key's
// account has (or sees, published) a template of that name, else 404.
func (s *Server) aliasExists(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	name := r.PathValue("alias")
	t, err := c.GetTemplate(r.Context(), name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": t.Name, "public": t.Public})
	return nil
}
