package templates

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/template"
	"github.com/withruntime/withruntime/internal/template/build"
)

// baseOf is what a build starts from: the base's root and defaults, and
// the key that names them exactly (the first step's cache parent). An
// image base (Image or Archive set) has them only once the build has read
// the image (importBase); Bytes are then the image's, which count in the
// template the build makes.
type baseOf struct {
	Base     string
	Layers   []string
	Defaults template.Defaults
	Key      string
	Name     string
	Image    string
	Archive  string
	Bytes    int64
}

// buildBase looks up the base f names for account. The built-in image
// is keyed by its name and Config.DefaultImageKey; a template by its base, layers and defaults (its
// content: the same template remade with the same content keeps the
// cache, a changed one does not). An image is read when the build runs
// (importBase).
func (l *Library) buildBase(ctx context.Context, account string, f build.From) (*baseOf, error) {
	switch {
	case f.Image != "":
		return &baseOf{Image: f.Image, Name: f.Image}, nil
	case f.Archive != "":
		return &baseOf{Archive: f.Archive, Name: "archive://" + f.Archive}, nil
	}
	ref, err := parse(f.Template)
	if err != nil {
		return nil, err
	}
	if ref.Name == template.DefaultBase {
		return &baseOf{Base: template.DefaultBase, Key: "withruntime/build-base/v1 default " + l.cfg.DefaultImageKey, Name: template.DefaultBase}, nil
	}
	t, err := l.Resolve(ctx, account, ref)
	if err != nil {
		return nil, err
	}
	return &baseOf{
		Base: t.Base, Layers: slices.Clone(t.Layers), Defaults: t.Defaults, Name: ref.String(),
		Key: contentKey(t.Base, t.Layers, t.Defaults),
	}, nil
}

// stepFailed is a step of the build that failed: the build's fault, not
// the server's.
type stepFailed struct{ msg string }

func (e *stepFailed) Error() string { return e.msg }

// runBuild runs a build to its end: each step that changes files in a
// sandbox of its own, started from the layers so far, its changes taken
// as one layer; a step whose key the cache holds is taken from it.
func (l *Library) runBuild(b *buildRun, keyID string, ref template.Ref, spec *build.Spec, base *baseOf, dir string, boxSize template.BuildSize) {
	ctx := context.Background()
	defer l.removeContext(dir)
	defer l.setActive(b.info.ID, nil)
	id := b.info.ID
	account := b.account
	fail := func(step int, err error) {
		now := l.cfg.Now()
		var sf *stepFailed
		if errors.As(err, &sf) {
			err = sandbox.Errorf(sandbox.KindInvalid, "%s", sf.msg)
		}
		b.end(func(i *template.Build) { i.State, i.Step, i.Err, i.EndedAt = template.BuildFailed, step, err, &now },
			template.BuildEvent{Type: template.LogEnd, State: template.BuildFailed, Step: step, Err: err, Message: err.Error()})
		close(b.done)
		l.log.Info("template build failed", "build_id", id, "template", ref.String(), "account", account, "step", step, "err", err)
	}
	b.log(template.BuildEvent{Type: template.LogInfo, Message: fmt.Sprintf("queued: %d steps on %s", len(spec.Steps), base.Name)})
	l.b.sem <- struct{}{}
	defer func() { <-l.b.sem }()
	started := l.cfg.Now()
	b.set(func(i *template.Build) { i.State, i.StartedAt = template.BuildRunning, &started })

	if base.pending() {
		if err := l.importBase(ctx, b, ref, base, dir); err != nil {
			fail(0, err)
			return
		}
		resolved, err := resolveOn(spec, base)
		if err != nil {
			fail(0, err)
			return
		}
		spec = resolved
	}
	cur := chain{layers: slices.Clone(base.Layers), key: base.Key}
	l.mu.Lock()
	l.setActive(id, cur.layers)
	l.mu.Unlock()
	env := maps.Clone(base.Defaults.Env)
	workdir, user := base.Defaults.Workdir, base.Defaults.User
	noCache := spec.NoCache
	size := base.Bytes
	// The context is removed once the last copy step has copied it into
	// its sandbox, before that sandbox's layer is read: a large context is
	// then on disk at most twice (in the sandbox and as the layer), not
	// three times.
	lastCopy := 0
	for i, st := range spec.Steps {
		if st.Kind() == build.KindCopy {
			lastCopy = i + 1
		}
	}
	for i, st := range spec.Steps {
		n := i + 1
		b.set(func(in *template.Build) { in.Step = n })
		var files map[string]string
		if st.Kind() == build.KindCopy {
			var err error
			files, err = build.HashContext(dir, st.Copy.Src, DefaultContextLimits)
			if err != nil {
				b.log(template.BuildEvent{Type: template.LogStep, Step: n, Steps: len(spec.Steps), Message: stepName(st)})
				fail(n, &stepFailed{fmt.Sprintf("step %d (%s): %v", n, stepName(st), err)})
				return
			}
		}
		cur.key = build.CacheKey(cur.key, st, files)
		if !st.MakesLayer() {
			b.log(template.BuildEvent{Type: template.LogStep, Step: n, Steps: len(spec.Steps), Message: stepName(st)})
			switch st.Kind() {
			case build.KindEnv:
				if env == nil {
					env = map[string]string{}
				}
				maps.Copy(env, st.Env)
			case build.KindWorkdir:
				workdir = st.Workdir
			case build.KindUser:
				user = st.User
			}
			continue
		}
		if st.NoCache {
			noCache = true
		}
		if !noCache {
			if e, ok := l.cacheTake(account, cur.key, id); ok {
				cur.layers, size = e.Layers, e.SizeBytes
				b.set(func(in *template.Build) { in.Cached++ })
				b.log(template.BuildEvent{Type: template.LogStep, Step: n, Steps: len(spec.Steps), Message: stepName(st), Cached: true})
				continue
			}
		}
		b.log(template.BuildEvent{Type: template.LogStep, Step: n, Steps: len(spec.Steps), Message: stepName(st)})
		s := &stepRun{l: l, b: b, n: n, keyID: keyID, spec: spec, size: boxSize, base: base, env: env, workdir: workdir, user: user, dir: dir, lastCopy: n == lastCopy}
		info, err := s.run(ctx, st, cur.layers)
		if err != nil {
			fail(n, err)
			return
		}
		cur.layers = append(slices.Clone(cur.layers), info.Digest)
		size += info.SizeBytes
		l.cachePut(account, cur.key, cacheEntry{Base: base.Base, Layers: cur.layers, SizeBytes: size, LayerBytes: info.SizeBytes})
		b.log(template.BuildEvent{Type: template.LogInfo, Step: n, Message: fmt.Sprintf("step %d made a layer of %d bytes", n, info.SizeBytes)})
	}

	t := &template.Template{
		Account: account, Name: ref.Name, Tag: ref.Tag, Source: template.SourceBuild,
		Base: base.Base, Layers: cur.layers, SizeBytes: size, Defaults: spec.Defaults(base.Defaults),
	}
	l.mu.Lock()
	err := l.record(ctx, t)
	l.mu.Unlock()
	if err != nil {
		fail(len(spec.Steps), err)
		return
	}
	now := l.cfg.Now()
	b.end(func(i *template.Build) { i.State, i.Result, i.EndedAt = template.BuildSucceeded, t, &now },
		template.BuildEvent{Type: template.LogEnd, State: template.BuildSucceeded, Message: fmt.Sprintf("template %s made (%s, %d layers)", t.Ref(), t.ID, len(t.Layers))})
	close(b.done)
	l.log.Info("template made", "template_id", t.ID, "template", t.Ref().String(), "account", account, "source", t.Source, "build_id", id, "layers", len(t.Layers), "bytes", size)
}

// chain is where a build is: the layers so far and the key of the last
// step.
type chain struct {
	layers []string
	key    string
}

// stepRun is one step run in a sandbox.
type stepRun struct {
	l       *Library
	b       *buildRun
	n       int
	keyID   string
	spec    *build.Spec
	size    template.BuildSize
	base    *baseOf
	env     map[string]string
	workdir string
	user    string
	dir     string
	// lastCopy: no later step reads the context, which goes once this
	// step has copied it.
	lastCopy bool
}

// run starts a sandbox on layers, runs st in it, and imports what it
// changed as one layer (recorded in the cache under the step's key by
// the caller's chain; the layer is held active until then).
func (s *stepRun) run(ctx context.Context, st build.Step, layers []string) (layer.Info, error) {
	l, b := s.l, s.b
	ref := template.Ref{Name: fmt.Sprintf("%s/%s-%d", buildNamespace, strings.TrimPrefix(b.info.ID, "bld_"), s.n), Tag: template.DefaultTag}
	key := b.account + "\x00" + ref.String()
	l.b.mu.Lock()
	l.b.roots[key] = &template.Template{ID: b.info.ID, Account: b.account, Name: ref.Name, Tag: ref.Tag, Source: template.SourceBuild, Base: s.base.Base, Layers: slices.Clone(layers)}
	l.b.mu.Unlock()
	timeout := l.cfg.StepTimeout
	if timeout == 0 {
		timeout = DefaultStepTimeout
	}
	req := service.CreateRequest{
		// A step's changes are read back with the root export, which
		// gVisor sandboxes have (a server without them refuses the
		// create, and the build says so).
		Isolation: sandbox.IsolationGVisor,
		Image:     ref.String(), VCPUs: s.spec.VCPUs, MemoryMiB: s.spec.MemoryMiB, DiskGiB: s.size.DiskGiB,
		TimeoutSeconds: int(timeout / time.Second),
		Metadata:       map[string]string{BuildMeta: b.info.ID},
	}
	if s.size.VCPUs != 0 {
		req.VCPUs = s.size.VCPUs
	}
	if s.size.MemoryMiB != 0 {
		req.MemoryMiB = s.size.MemoryMiB
	}
	if n := s.spec.Network; n != nil {
		req.Network = sandbox.Network{Internet: n.Internet, Allow: slices.Clone(n.Allow)}
	}
	rec, err := l.sandboxes().Create(ctx, b.account, s.keyID, req)
	l.b.mu.Lock()
	delete(l.b.roots, key)
	l.b.mu.Unlock()
	if err != nil {
		return layer.Info{}, fmt.Errorf("step %d: starting its sandbox: %w", s.n, err)
	}
	defer func() {
		if _, err := l.sandboxes().Stop(context.WithoutCancel(ctx), b.account, rec.ID); err != nil {
			l.log.Warn("stopping a build's sandbox", "build_id", b.info.ID, "sandbox_id", rec.ID, "err", err)
		}
	}()
	b.log(template.BuildEvent{Type: template.LogInfo, Step: s.n, Message: "sandbox " + rec.ID})
	// A command ends a minute before its sandbox's lease, so that a step
	// that runs too long fails as timed out rather than cut off.
	ag := &agentClient{l: l, account: b.account, id: rec.ID, timeout: max(timeout-time.Minute, time.Minute)}
	switch st.Kind() {
	case build.KindCopy:
		if err := s.copy(ctx, ag, st.Copy); err != nil {
			return layer.Info{}, err
		}
		if s.lastCopy {
			l.removeContext(s.dir)
		}
	default:
		cmd, u := st.Command()
		if u == "" {
			u = s.user
		}
		execCmd, execUser := build.RunAs(cmd, u)
		if s.workdir != "" {
			if code, err := ag.exec(ctx, "mkdir -p "+build.Quote(s.workdir), build.UserRoot, "", nil, nil); err != nil || code != 0 {
				return layer.Info{}, s.failed(st, code, err, "making its workdir")
			}
		}
		code, err := ag.exec(ctx, execCmd, execUser, s.workdir, s.env, func(stream, data string) {
			b.log(template.BuildEvent{Type: stream, Step: s.n, Message: data})
		})
		if err != nil || code != 0 {
			return layer.Info{}, s.failed(st, code, err, "")
		}
	}
	return l.stepLayer(ctx, b.account, rec.ID, b.info.ID, layers)
}

func (s *stepRun) failed(st build.Step, code int, err error, what string) error {
	if what != "" {
		what = " " + what
	}
	if err != nil {
		var se *sandbox.Error
		if errors.As(err, &se) {
			return fmt.Errorf("step %d (%s)%s: %w", s.n, stepName(st), what, err)
		}
		return &stepFailed{fmt.Sprintf("step %d (%s)%s: %v", s.n, stepName(st), what, err)}
	}
	return &stepFailed{fmt.Sprintf("step %d (%s)%s exited with code %d", s.n, stepName(st), what, code)}
}

// stepLayer imports what sandbox id changed in its root as one layer
// over layers, and makes it active for build id before Collect may run.
func (l *Library) stepLayer(ctx context.Context, account, id, buildID string, layers []string) (layer.Info, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := l.cfg.Sandboxes.ExportRoot(ctx, account, id, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	info, err := l.cfg.Layers.Import(ctx, pr, layer.Overlay, l.cfg.Limits)
	pr.CloseWithError(io.ErrClosedPipe)
	exErr := <-done
	if err != nil {
		return layer.Info{}, layerError(err)
	}
	if exErr != nil {
		l.dropUnrecorded(info.Digest)
		return layer.Info{}, exErr
	}
	l.setActive(buildID, append(slices.Clone(layers), info.Digest))
	return info, nil
}

func (l *Library) removeContext(dir string) {
	if err := removeAll(dir); err != nil {
		l.log.Warn("removing a build context", "dir", dir, "err", err)
	}
}
