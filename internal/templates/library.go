package templates

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/layer"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// Store is what the library keeps and reads: the templates, and the
// sandboxes' records to know which templates are in use.
type Store interface {
	store.Templates
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Record, error)
}

// Layers is the layer store (layer.Store).
type Layers interface {
	Import(ctx context.Context, r io.Reader, f layer.Format, lim layer.Limits) (layer.Info, error)
	List() ([]layer.Info, error)
	Remove(digest string) error
	StacksDir() string
}

// Sandboxes is what a snapshot asks of the sandboxes (the manager), and
// what the collection asks of its warm pools.
type Sandboxes interface {
	ExportRoot(ctx context.Context, account, id string, w io.Writer) (*sandbox.Record, error)
	// PoolTemplates lists the templates warm pool members started from:
	// they have no record, and use their template's layers all the same.
	PoolTemplates() []string
}

// BuildSandboxes is what a build asks of them too: its steps run in
// sandboxes of the build's account, created, used through their agent
// and stopped as any other (the manager is one; builds run only when
// Config.Sandboxes is).
type BuildSandboxes interface {
	Sandboxes
	Create(ctx context.Context, account, keyID string, req service.CreateRequest) (*sandbox.Record, error)
	Stop(ctx context.Context, account, id string) (*sandbox.Record, error)
	Agent(ctx context.Context, account, id string) (http.RoundTripper, error)
}

// Config is what a Library works with.
type Config struct {
	Store     Store
	Layers    Layers
	Sandboxes Sandboxes
	// Quota bounds each account's live templates (zero: no bound).
	Quota store.TemplateQuota
	// Limits bound one layer a snapshot or an import writes.
	Limits layer.Limits
	// TempDir holds image archives while they are imported.
	TempDir string
	// DiskDir is a directory on the file system that holds the layers and
	// TempDir (serve: <data-dir>/templates). What an import, a snapshot
	// or a build step writes there is checked against its free space as it
	// goes, less what admission promised to live sandboxes (disk.go).
	// Empty: not checked.
	DiskDir string
	// DiskReserve is what template writes leave free on top of that
	// (DefaultDiskReserve when 0).
	DiskReserve int64
	// CARoots is the PEM bundle an imported image without CA roots gets.
	CARoots []byte
	// PrivateRegistries lets an import reach a registry at a loopback,
	// private or link-local address (an operator's own; serve
	// --allow-private-registries). Without it only public addresses.
	PrivateRegistries bool
	// Grace is how long a removed template is kept whatever uses it: a
	// create that resolved it just before may not have recorded its
	// sandbox yet (DefaultGrace when 0).
	Grace time.Duration
	// BuildDir holds the build cache's index and the builds' contexts
	// (builds run only when it is set).
	BuildDir string
	// DefaultImageKey names the built-in image's content (its recipe's
	// key): a build on it is cached under it, so a server whose image
	// changed does not reuse layers made over the old one.
	DefaultImageKey string
	// MaxBuilds bounds the builds that run at once (DefaultMaxBuilds when
	// 0); StepTimeout a step's sandbox lease (DefaultStepTimeout when 0).
	MaxBuilds   int
	StepTimeout time.Duration
	Logger      *slog.Logger
	Now         func() time.Time
}

// DefaultGrace is Config.Grace's default.
const DefaultGrace = 10 * time.Second

// Library is the template library of one server.
type Library struct {
	cfg Config
	log *slog.Logger
	// mu orders the writes of layers and records with Collect: a layer is
	// never removed between its import and the record that names it.
	mu sync.Mutex
	// The builds (build.go) and their cache (buildcache.go).
	once  sync.Once
	b     *builds
	cache *buildCache
}

// New returns the library of cfg.
func New(cfg Config) *Library {
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DiskReserve == 0 {
		cfg.DiskReserve = DefaultDiskReserve
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Library{cfg: cfg, log: log}
	// Every layer written goes through the disk check: an import's, a
	// snapshot's and a build step's alike.
	if cfg.Layers != nil && cfg.DiskDir != "" {
		l.cfg.Layers = &checkedLayers{Layers: cfg.Layers, l: l}
	}
	return l
}

// SetSandboxes gives the library the sandboxes it snapshots (the
// manager, made after the library it resolves templates with).
func (l *Library) SetSandboxes(s Sandboxes) { l.cfg.Sandboxes = s }

// Resolve returns the template account's create names: its own of that
// name and tag, else a public one (manager.Templates). A template made
// over another built-in image than this server's is refused (conflict):
// what is started or built from it must stand on the files it was made on.
func (l *Library) Resolve(ctx context.Context, account string, ref template.Ref) (*template.Template, error) {
	t, err := l.lookup(ctx, account, ref)
	if err != nil {
		return nil, err
	}
	if t.Base == template.DefaultBase && t.BaseKey != "" && l.cfg.DefaultImageKey != "" && t.BaseKey != l.cfg.DefaultImageKey {
		return nil, sandbox.Errorf(sandbox.KindConflict,
			"template %s was made over the built-in image %s, and this server's is now %s (an upgrade changed it): rebuild or re-import the template",
			t.Ref(), t.BaseKey, l.cfg.DefaultImageKey)
	}
	return t, nil
}

// lookup is Resolve without the base's check: a template made over an old
// built-in image is still shown, removed and published.
func (l *Library) lookup(ctx context.Context, account string, ref template.Ref) (*template.Template, error) {
	if isBuildRef(ref) {
		return l.resolveBuildRef(account, ref)
	}
	t, err := l.cfg.Store.TemplateByRef(ctx, account, ref)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "no template %s", ref)
	}
	return t, err
}

// Get returns the template name ("name" or "name:tag") as account sees it.
func (l *Library) Get(ctx context.Context, account, name string) (*template.Template, error) {
	ref, err := parse(name)
	if err != nil {
		return nil, err
	}
	return l.lookup(ctx, account, ref)
}

// List returns account's templates and the public ones.
func (l *Library) List(ctx context.Context, account string) ([]*template.Template, error) {
	return l.cfg.Store.ListTemplates(ctx, store.TemplateFilter{Account: account, Public: true})
}

// Delete removes account's template name: its name is free at once, and
// its layers go once no sandbox uses it. A public template of another
// account is not account's to remove.
func (l *Library) Delete(ctx context.Context, account, name string) (*template.Template, error) {
	t, err := l.Get(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if t.Account != account {
		return nil, sandbox.Errorf(sandbox.KindForbidden, "template %s is published by another account; only it may remove it", t.Ref())
	}
	now := l.cfg.Now()
	if err := l.cfg.Store.DeleteTemplate(ctx, t.ID, now); err != nil {
		return nil, err
	}
	t.DeletedAt = &now
	return t, nil
}

// Publish shows account's template name to every account (public), or
// takes that back. Only the admin's key reaches it (the route is the
// admin's): an account's own template of the same name still goes first
// for it.
func (l *Library) Publish(ctx context.Context, account, name string, public bool) (*template.Template, error) {
	t, err := l.Get(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if t.Account != account {
		return nil, sandbox.Errorf(sandbox.KindForbidden, "template %s is another account's", t.Ref())
	}
	if err := l.cfg.Store.SetTemplatePublic(ctx, t.ID, public); err != nil {
		return nil, err
	}
	t.Public = public
	return t, nil
}

// parse reads a template's name, as a bad request when it is malformed.
func parse(name string) (template.Ref, error) {
	ref, err := template.ParseRef(name)
	if err != nil {
		return ref, sandbox.Errorf(sandbox.KindInvalid, "%v", err)
	}
	return ref, reserved(ref)
}

// record stores t under its name, replacing the account's template of that
// name, and removes what the replaced one no longer needs at the next
// Collect. The caller holds l.mu.
func (l *Library) record(ctx context.Context, t *template.Template) error {
	if len(t.Layers) > template.MaxLayers {
		return sandbox.Errorf(sandbox.KindInvalid, "template %s would have %d layers, at most %d: make it from an image or a build instead", t.Ref(), len(t.Layers), template.MaxLayers)
	}
	if t.Base == template.DefaultBase && t.BaseKey == "" {
		// Layers made now stand on this server's built-in image.
		t.BaseKey = l.cfg.DefaultImageKey
	}
	t.ID = template.NewID()
	t.CreatedAt = l.cfg.Now()
	_, err := l.cfg.Store.ReplaceTemplate(ctx, t, l.cfg.Quota)
	return err
}

// inUse returns the ids of the templates that live or paused sandboxes,
// and warm pool members, were started from.
func (l *Library) inUse(ctx context.Context) (map[string]bool, error) {
	recs, err := l.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	if l.cfg.Sandboxes != nil {
		for _, id := range l.cfg.Sandboxes.PoolTemplates() {
			used[id] = true
		}
	}
	for _, r := range recs {
		if r.State != sandbox.StateEnded && r.Spec.Root != nil {
			used[r.Spec.Root.Template] = true
		}
	}
	return used, nil
}

// Collect purges the removed templates that nothing uses any more (and
// that were removed more than Config.Grace ago), then removes the layers
// no remaining record names.
func (l *Library) Collect(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	used, err := l.inUse(ctx)
	if err != nil {
		return err
	}
	all, err := l.cfg.Store.ListTemplates(ctx, store.TemplateFilter{Deleted: true})
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	var kept []*template.Template
	var errs []error
	for _, t := range all {
		if t.DeletedAt != nil && !used[t.ID] && l.cfg.Now().Sub(*t.DeletedAt) >= l.cfg.Grace {
			if err := l.cfg.Store.PurgeTemplate(ctx, t.ID); err != nil {
				errs = append(errs, err)
			} else {
				l.log.Info("template purged", "template_id", t.ID, "template", t.Ref().String(), "account", t.Account)
				continue
			}
		}
		for _, d := range t.Layers {
			keep[d] = true
		}
		kept = append(kept, t)
	}
	// The build cache's layers, and those running builds use.
	l.buildKeep(keep)
	errs = append(errs, l.collectStacks(kept))
	stored, err := l.cfg.Layers.List()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, info := range stored {
		if !keep[info.Digest] {
			if err := l.cfg.Layers.Remove(info.Digest); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Run collects every interval until ctx ends.
func (l *Library) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.Collect(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("collecting removed templates", "err", err)
			}
		}
	}
}

// withParent returns a new template of account at ref over the root of a
// sandbox (nil: the built-in image), with that template's defaults.
func (l *Library) withParent(ctx context.Context, account string, ref template.Ref, root *sandbox.Root) (*template.Template, error) {
	t := &template.Template{Account: account, Name: ref.Name, Tag: ref.Tag, Base: template.DefaultBase}
	if root == nil {
		return t, nil
	}
	t.Base, t.Layers = root.Base, slices.Clone(root.Layers)
	parent, err := l.cfg.Store.GetTemplate(ctx, root.Template)
	if err == nil {
		t.Defaults = parent.Defaults
		// A sandbox keeps the image it started on (one of a parent
		// recorded before an upgrade still runs on the old one).
		t.BaseKey = parent.BaseKey
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		return nil, err
	}
	return t, nil
}

// The defaults of an account's template quota (serve --max-templates,
// --max-template-gib), and the bound on one layer's entries.
const (
	DefaultMaxCount   = 100
	DefaultMaxBytes   = int64(50) << 30
	DefaultMaxEntries = 2_000_000
)

// collectStacks removes what was made of stacks of layers (a microVM's
// disk of a template, named by layer.StackKey) but those of the kept
// templates. Files being made are in "make-" directories, left alone.
func (l *Library) collectStacks(kept []*template.Template) error {
	want := map[string]bool{}
	for _, t := range kept {
		want[layer.StackKey(t.Base, t.Layers)] = true
	}
	entries, err := os.ReadDir(l.cfg.Layers.StacksDir())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), ".ext4")
		if !ok || !e.Type().IsRegular() || want[key] {
			continue
		}
		if err := os.Remove(filepath.Join(l.cfg.Layers.StacksDir(), e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
