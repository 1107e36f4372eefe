package gvisor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Name is the backend's registered name.
const Name = "gvisor"

// Config locates what the backend needs on the host.
type Config struct {
	DataDir  string
	CacheDir string
	// Runsc is the runsc binary; default CacheDir/bin/runsc.
	Runsc string
	// Agent is the sandbox-agent binary; default CacheDir/bin/sandbox-agent.
	Agent string
	// RunDir holds runtime state that must not outlive a host reboot;
	// default /run/withruntime/<hash of DataDir>.
	RunDir string
	// Egress wires sandboxes to the host's egress services (nil: no
	// network at all).
	Egress *sandbox.EgressWiring
	// SharedCheckpoints, when set, is the directory every node mounts
	// where paused sandboxes' checkpoints are kept (one <id>/ each), so
	// that another node's backend with the same cache can resume them.
	SharedCheckpoints string
	// Layers finds the layers of the templates sandboxes start from (nil:
	// only the built-in image).
	Layers sandbox.LayerDirs
}

// Backend runs sandboxes with runsc.
type Backend struct {
	cfg      Config
	agentDir string // read-only directory mounted at /opt/withruntime

	plumb *network.Plumbing // nil: sandboxes have no network

	// shared is the shared checkpoint dir, opened once it was checked (nil
	// without shared checkpoints): every access to it goes through it.
	shared *os.Root

	net *network.Links // the sandboxes' links (nil: no network)

	mu        sync.Mutex // guards instances and digests
	instances map[string]*instance
	// digests holds the digest of each checkpoint Pause left in the
	// shared dir, until CheckpointDigest takes it.
	digests map[string]string
}

var (
	_ sandbox.Backend   = (*Backend)(nil)
	_ sandbox.Meter     = (*Backend)(nil)
	_ sandbox.Networked = (*Backend)(nil)
	_ sandbox.Freezer   = (*Backend)(nil)

	_ sandbox.CheckpointDigester = (*Backend)(nil)
)

// New checks the configuration and prepares the host (cgroup parents).
func New(cfg Config) (*Backend, error) {
	if cfg.DataDir == "" || cfg.CacheDir == "" {
		return nil, fmt.Errorf("gvisor backend needs a data dir and a cache dir")
	}
	if cfg.Runsc == "" {
		cfg.Runsc = filepath.Join(cfg.CacheDir, "bin", "runsc")
	}
	if cfg.Agent == "" {
		cfg.Agent = filepath.Join(cfg.CacheDir, "bin", "sandbox-agent")
	}
	if cfg.RunDir == "" {
		cfg.RunDir = sandbox.RunDir("/run/withruntime", cfg.DataDir)
	}
	for _, p := range []string{cfg.Runsc, cfg.Agent} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is missing: run `withruntime setup`", p)
		}
	}
	if _, err := image.Rootfs(cfg.CacheDir, image.DefaultName); err != nil {
		return nil, err
	}
	agentDir, err := stageAgent(cfg)
	if err != nil {
		return nil, err
	}
	if err := prepareCgroups(); err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, agentDir: agentDir, instances: map[string]*instance{}, digests: map[string]string{}}
	if d := cfg.SharedCheckpoints; d != "" {
		r, err := openSharedRoot(d)
		if err != nil {
			return nil, fmt.Errorf("shared checkpoint dir: %w", err)
		}
		b.shared = r
	}
	if w := cfg.Egress; w != nil {
		// The server's one plumbing, shared with its other backends.
		p, err := network.Join(w.Net)
		if err != nil {
			return nil, fmt.Errorf("installing packet rules: %w", err)
		}
		b.plumb = p
		b.net = network.NewLinks(p)
	}
	return b, nil
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return Name }

// stageAgent copies the agent binary into a content-addressed directory of
// the cache, so that a rebuilt agent never changes under a live sandbox.
func stageAgent(cfg Config) (string, error) {
	data, err := os.ReadFile(cfg.Agent)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	dir := filepath.Join(cfg.CacheDir, "agent", hex.EncodeToString(sum[:])[:16])
	dst := filepath.Join(dir, "sandbox-agent")
	if _, err := os.Stat(dst); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// A temporary file of this call's own: servers starting together on
	// one cache each stage the same agent, and the first rename wins.
	f, err := os.CreateTemp(dir, "sandbox-agent.*.tmp")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o755)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return dir, nil
}

// paths of one sandbox.
type paths struct {
	state      string // DataDir/sandboxes/ID: survives restarts
	bundle     string
	upper      string
	checkpoint string
	// shared is SharedCheckpoints/ID ("" without shared checkpoints):
	// what a paused sandbox leaves for any node to resume.
	shared  string
	run     string // RunDir/ID
	sock    string // directory bind-mounted at /run/withruntime
	netns   string
	pidFile string
}

func (b *Backend) paths(id string) paths {
	state := filepath.Join(b.cfg.DataDir, "sandboxes", id)
	run := filepath.Join(b.cfg.RunDir, id)
	var shared string
	if b.cfg.SharedCheckpoints != "" {
		shared = filepath.Join(b.cfg.SharedCheckpoints, id)
	}
	return paths{
		shared:     shared,
		state:      state,
		bundle:     filepath.Join(state, "bundle"),
		upper:      filepath.Join(state, "upper"),
		checkpoint: filepath.Join(state, "checkpoint"),
		run:        run,
		sock:       filepath.Join(run, "sock"),
		netns:      filepath.Join(run, "netns"),
		pidFile:    filepath.Join(run, "pid"),
	}
}

func (b *Backend) runscRoot() string { return filepath.Join(b.cfg.RunDir, "runsc") }
