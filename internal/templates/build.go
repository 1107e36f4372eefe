package templates

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/tarx"
	"github.com/withruntime/withruntime/internal/template"
	"github.com/withruntime/withruntime/internal/template/build"
)

// BuildMeta is the metadata key that marks a build's sandboxes with the
// build's id: a server that starts finds those of builds that died with
// its previous process and stops them.
const BuildMeta = "withruntime.build"

// buildNamespace is the first part of the names under which a build's
// sandboxes resolve the layers made so far. It is reserved: no template
// is made under it, and Resolve answers it only from the running builds
// of the same account, never from the store.
const buildNamespace = "withruntime-build"

// Bounds of the builds a server keeps.
const (
	// DefaultMaxBuilds is how many builds run at once on a server; later
	// ones wait, queued.
	DefaultMaxBuilds = 4
	// DefaultStepTimeout bounds one step's sandbox (its lease).
	DefaultStepTimeout = 30 * time.Minute
	// MaxBuildLog bounds a build's log in memory: past it the oldest
	// events are dropped, and a reader told how many.
	MaxBuildLog = 4 << 20
	// keptBuilds bounds the finished builds kept for GET; keptFor is how
	// long one is kept at least.
	keptBuilds = 200
	keptFor    = time.Hour
	// MaxBuildsPerAccount bounds an account's builds queued or running
	// (each holds its context on disk until it ends).
	MaxBuildsPerAccount = 8
	// maxLogLine bounds one output event: longer output is split.
	maxLogLine = 16 << 10
)

// DefaultContextLimits bound an uploaded build context.
var DefaultContextLimits = build.ContextLimits{MaxEntries: 100_000, MaxBytes: 2 << 30}

func eventSize(e template.BuildEvent) int { return len(e.Message) + 64 }

// buildRun is one build in memory.
type buildRun struct {
	mu      sync.Mutex
	info    template.Build
	account string
	events  []template.BuildEvent
	first   int // the index of events[0] in the whole log
	bytes   int
	changed chan struct{}
	done    chan struct{}
}

func (b *buildRun) log(e template.BuildEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.logLocked(e)
}

// end records how the build ended and its last event together: a reader
// that sees it ended has its end event too.
func (b *buildRun) end(f func(*template.Build), e template.BuildEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.info)
	b.logLocked(e)
}

// logLocked appends e. The caller holds b.mu.
func (b *buildRun) logLocked(e template.BuildEvent) {
	e.Time = time.Now()
	b.events = append(b.events, e)
	b.bytes += eventSize(e)
	for b.bytes > MaxBuildLog && len(b.events) > 1 {
		b.bytes -= eventSize(b.events[0])
		b.events[0] = template.BuildEvent{}
		b.events = b.events[1:]
		b.first++
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *buildRun) set(f func(*template.Build)) {
	b.mu.Lock()
	f(&b.info)
	b.mu.Unlock()
}

func (b *buildRun) snapshot() template.Build {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.info
}

// builds are the builds of a server, in memory only: a restart fails
// those in flight (their sandboxes are stopped, no template is made).
type builds struct {
	mu   sync.Mutex
	runs map[string]*buildRun
	// roots are the parents of build sandboxes being created, by account
	// and reserved ref (Resolve).
	roots map[string]*template.Template
	// active are the layers running builds use: Collect keeps them.
	active map[string]map[string]bool
	// starting counts each account's builds between their check against
	// MaxBuildsPerAccount and their entry in runs.
	starting map[string]int
	sem      chan struct{}
}

func newBuildID() string {
	var b [8]byte
	rand.Read(b[:])
	return "bld_" + hex.EncodeToString(b[:])
}

// isBuildRef reports whether ref is in the builds' reserved namespace.
func isBuildRef(ref template.Ref) bool {
	return strings.HasPrefix(ref.Name, buildNamespace+"/")
}

// reserved refuses a name in the builds' namespace for a template.
func reserved(ref template.Ref) error {
	if isBuildRef(ref) || ref.Name == buildNamespace {
		return sandbox.Errorf(sandbox.KindInvalid, "template names under %s/ are the server's own", buildNamespace)
	}
	return nil
}

func (l *Library) buildsInit() {
	l.once.Do(func() {
		n := l.cfg.MaxBuilds
		if n <= 0 {
			n = DefaultMaxBuilds
		}
		l.b = &builds{runs: map[string]*buildRun{}, roots: map[string]*template.Template{}, active: map[string]map[string]bool{}, starting: map[string]int{}, sem: make(chan struct{}, n)}
	})
}

// sandboxes are the sandboxes builds run in, or nil when this library's
// cannot run them.
func (l *Library) sandboxes() BuildSandboxes {
	bs, _ := l.cfg.Sandboxes.(BuildSandboxes)
	return bs
}

// resolveBuildRef is Resolve for the reserved namespace: the parent of a
// build sandbox of account being created now, never another account's.
func (l *Library) resolveBuildRef(account string, ref template.Ref) (*template.Template, error) {
	l.buildsInit()
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if t := l.b.roots[account+"\x00"+ref.String()]; t != nil {
		c := *t
		c.Layers = slices.Clone(t.Layers)
		return &c, nil
	}
	return nil, sandbox.Errorf(sandbox.KindNotFound, "no template %s", ref)
}

// activeLayers adds the layers running builds use to keep.
func (l *Library) activeLayers(keep map[string]bool) {
	l.buildsInit()
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	for _, set := range l.b.active {
		for d := range set {
			keep[d] = true
		}
	}
}

// setActive records the layers build id uses now (nil: none). The caller
// holds l.mu when the layers were just read from the cache or imported,
// so that Collect, which holds it too, never sees them unnamed.
func (l *Library) setActive(id string, layers []string) {
	l.buildsInit()
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if layers == nil {
		delete(l.b.active, id)
		return
	}
	set := map[string]bool{}
	for _, d := range layers {
		set[d] = true
	}
	l.b.active[id] = set
}

// Build starts a build of the JSON build specification specJSON
// (build.Decode) for account, its sandboxes of size (zero values: the
// spec's vcpus and memory_mib, then the server's defaults), (keyID: the key that asked,
// whose limits its sandboxes count against) and returns it at once,
// queued; it runs in the background. contextTar is the build context (a
// tar; nil or empty for none), read whole and unpacked before Build
// returns, bounded by DefaultContextLimits; a first entry named
// ContextSpecName (the spec itself, in the API's tar form) is skipped.
//
// What can be checked before anything runs is checked here and refused
// as invalid_request (or not_found for a base that is not there): the
// spec, the Dockerfile against its base, the base, the number of layers
// the template would have. A base that is an OCI image (a registry
// reference, an archive in the context) is read when the build runs
// (buildimage.go): what depends on it is checked then, and fails the build.
func (l *Library) Build(ctx context.Context, account, keyID string, specJSON []byte, contextTar io.Reader, size template.BuildSize) (*template.Build, error) {
	l.buildsInit()
	if l.sandboxes() == nil || l.cfg.BuildDir == "" {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "this server runs no builds")
	}
	spec, err := build.Decode(specJSON)
	if err != nil {
		return nil, buildError(err)
	}
	ref, err := parse(spec.Name)
	if err != nil {
		return nil, err
	}
	// The base is what the Dockerfile's FROM names, known before the base
	// is read (an image base is read when the build runs, and the
	// Dockerfile resolved on its defaults then).
	outline, err := spec.Outline()
	if err != nil {
		return nil, buildError(err)
	}
	base, err := l.buildBase(ctx, account, outline.Base())
	if err != nil {
		return nil, err
	}
	resolved := spec
	steps := len(outline.Steps)
	if !base.pending() {
		if resolved, err = resolveOn(spec, base); err != nil {
			return nil, err
		}
		steps = len(resolved.Steps)
	}

	// The count and this build's place in it are taken together, so
	// requests at once cannot all pass it.
	l.b.mu.Lock()
	busy := l.inFlight(account)
	if busy < MaxBuildsPerAccount {
		l.b.starting[account]++
	}
	l.b.mu.Unlock()
	if busy >= MaxBuildsPerAccount {
		return nil, sandbox.Errorf(sandbox.KindConcurrency, "account has %d builds queued or running, at most %d: wait for one to end", busy, MaxBuildsPerAccount)
	}
	reserved := true
	unreserve := func() { // the caller holds l.b.mu
		if reserved {
			if l.b.starting[account]--; l.b.starting[account] <= 0 {
				delete(l.b.starting, account)
			}
			reserved = false
		}
	}
	defer func() {
		l.b.mu.Lock()
		unreserve()
		l.b.mu.Unlock()
	}()
	id := newBuildID()
	dir := filepath.Join(l.cfg.BuildDir, "contexts", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if contextTar != nil {
		if err := unpackContext(dir, l.diskChecked(contextTar)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	now := l.cfg.Now()
	b := &buildRun{
		account: account,
		info:    template.Build{ID: id, Template: ref.String(), State: template.BuildQueued, Steps: steps, CreatedAt: now},
		changed: make(chan struct{}), done: make(chan struct{}),
	}
	l.b.mu.Lock()
	l.pruneBuilds(now)
	l.b.runs[id] = b
	unreserve()
	l.b.mu.Unlock()
	l.log.Info("template build queued", "build_id", id, "template", ref.String(), "account", account, "steps", steps, "base", base.Name)
	// The build as it starts, queued: taken before it runs, which may
	// change it at once.
	info := b.snapshot()
	go l.runBuild(b, keyID, ref, resolved, base, dir, size)
	return &info, nil
}

// resolveOn resolves spec's Dockerfile on base's defaults, and refuses a
// template that would have more than template.MaxLayers layers.
func resolveOn(spec *build.Spec, base *baseOf) (*build.Spec, error) {
	resolved, err := spec.Resolve(func(build.From) (template.Defaults, error) { return base.Defaults, nil })
	if err != nil {
		var se *sandbox.Error
		if errors.As(err, &se) {
			return nil, se
		}
		return nil, buildError(err)
	}
	n := len(base.Layers)
	for _, st := range resolved.Steps {
		if st.MakesLayer() {
			n++
		}
	}
	if n > template.MaxLayers {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "the template would have %d layers (its base's %d and one for each step that changes files), at most %d: join run steps with && or install packages in one step", n, len(base.Layers), template.MaxLayers)
	}
	return resolved, nil
}

// ContextSpecName is the name of the spec's entry in the API's tar form
// of a build (the first entry, before the context's files).
const ContextSpecName = "withruntime-build.json"

// unpackContext writes the context tar into dir with the shared checked
// extractor: names inside dir only, parents never symlinks, files,
// directories and links only, bounded.
func unpackContext(dir string, r io.Reader) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	x := tarx.NewReader(r, tarx.Options{
		MaxEntries: DefaultContextLimits.MaxEntries, MaxBytes: DefaultContextLimits.MaxBytes,
		Owner: &tarx.Owner{UID: os.Getuid(), GID: os.Getgid()},
	})
	first := true
	for {
		hdr, name, err := x.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return contextError(err)
		}
		if first && name == ContextSpecName {
			first = false
			continue
		}
		first = false
		if name == "" {
			continue
		}
		if err := x.Extract(root, hdr, name); err != nil {
			return contextError(err)
		}
		return nil
	}
}

func contextError(err error) error {
	if errors.Is(err, tarx.ErrTooLarge) {
		return sandbox.Errorf(sandbox.KindPayloadTooLarge, "the build context is too large: %v", err)
	}
	var se *sandbox.Error
	if errors.As(err, &se) {
		return err
	}
	return sandbox.Errorf(sandbox.KindInvalid, "the build context was refused: %v", err)
}

// buildError is a refused spec as the API answers it.
func buildError(err error) error {
	return sandbox.Errorf(sandbox.KindInvalid, "%v", err)
}

// pruneBuilds forgets finished builds past the bounds. The caller holds
// l.b.mu.
func (l *Library) pruneBuilds(now time.Time) {
	type done struct {
		id  string
		end time.Time
	}
	var finished []done
	for id, b := range l.b.runs {
		info := b.snapshot()
		if info.EndedAt != nil {
			finished = append(finished, done{id, *info.EndedAt})
		}
	}
	slices.SortFunc(finished, func(a, b done) int { return a.end.Compare(b.end) })
	for i, f := range finished {
		if now.Sub(f.end) > keptFor || len(finished)-i > keptBuilds {
			delete(l.b.runs, f.id)
		}
	}
}

// inFlight counts account's builds that have not ended, and those being
// started. The caller holds l.b.mu.
func (l *Library) inFlight(account string) int {
	n := l.b.starting[account]
	for _, b := range l.b.runs {
		if b.account == account && b.snapshot().EndedAt == nil {
			n++
		}
	}
	return n
}

// GetBuild returns build id of account (not_found for another's).
func (l *Library) GetBuild(ctx context.Context, account, id string) (*template.Build, error) {
	b, err := l.buildOf(account, id)
	if err != nil {
		return nil, err
	}
	info := b.snapshot()
	return &info, nil
}

func (l *Library) buildOf(account, id string) (*buildRun, error) {
	l.buildsInit()
	l.b.mu.Lock()
	b := l.b.runs[id]
	l.b.mu.Unlock()
	if b == nil || b.account != account {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no build %s (builds are kept in memory: a server restart forgets them)", id)
	}
	return b, nil
}

// BuildLogs calls fn with each event of build id's log in order, from the
// oldest kept; with follow, it waits for new ones until the build ends
// (its last event is template.LogEnd) or ctx ends.
func (l *Library) BuildLogs(ctx context.Context, account, id string, follow bool, fn func(template.BuildEvent) error) error {
	b, err := l.buildOf(account, id)
	if err != nil {
		return err
	}
	next := 0
	for {
		b.mu.Lock()
		var batch []template.BuildEvent
		if next < b.first {
			batch = append(batch, template.BuildEvent{Time: time.Now(), Type: template.LogDropped, Dropped: b.first - next})
			next = b.first
		}
		batch = append(batch, b.events[next-b.first:]...)
		next = b.first + len(b.events)
		changed := b.changed
		ended := b.info.EndedAt != nil
		b.mu.Unlock()
		for _, e := range batch {
			if err := fn(e); err != nil {
				return err
			}
		}
		if !follow || ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// stepName is how a step shows in the log.
func stepName(st build.Step) string {
	short := func(s string) string {
		s = strings.Join(strings.Fields(s), " ")
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		return s
	}
	switch st.Kind() {
	case build.KindApt:
		return "apt_install " + strings.Join(st.AptInstall, " ")
	case build.KindPip:
		return "pip_install " + strings.Join(st.PipInstall, " ")
	case build.KindNpm:
		return "npm_install " + strings.Join(st.NpmInstall, " ")
	case build.KindRun:
		if st.User != "" {
			return fmt.Sprintf("run (as %s) %s", st.User, short(st.Run))
		}
		return "run " + short(st.Run)
	case build.KindCopy:
		return fmt.Sprintf("copy %s %s", st.Copy.Src, st.Copy.Dest)
	case build.KindEnv:
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range st.Env {
				if !yield(k) {
					return
				}
			}
		})
		return "env " + strings.Join(keys, " ")
	case build.KindWorkdir:
		return "workdir " + st.Workdir
	case build.KindUser:
		return "user " + st.User
	}
	return "?"
}
