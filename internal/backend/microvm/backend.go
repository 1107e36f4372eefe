package microvm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/withruntime/withruntime/internal/hostcgroup"
	"github.com/withruntime/withruntime/internal/image"
	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Name is the backend's registered name.
const Name = "microvm"

// Config locates what the backend needs on the host.
type Config struct {
	DataDir  string
	CacheDir string
	// Accel is QEMU's accelerator: "kvm" (the default) or "tcg"
	// (software emulation: for tests and hosts without KVM).
	Accel string
	// RunDir holds what must not outlive a reboot; default
	// /run/withruntime-vm/<hash of DataDir>.
	RunDir string
	// Egress wires sandboxes to the host's egress services (nil: no
	// network at all), through the server's one plumbing (Egress.Net),
	// which its other backends share.
	Egress *sandbox.EgressWiring
	// Layers finds the layers of the templates sandboxes start from (nil:
	// only the default image).
	Layers sandbox.LayerDirs
}

// cgroupParent holds every microVM's cgroup (QEMU and its threads).
const cgroupParent = "withruntime-vm"

// Backend runs sandboxes as QEMU microVMs.
type Backend struct {
	cfg  Config
	root string // the jail's read-only tree (jailRoot)
	base string // the default image's ext4 disk
	cg   hostcgroup.Layout

	plumb *network.Plumbing // nil: sandboxes have no network
	net   *network.Links    // the sandboxes' links (nil: no network)

	mu        sync.Mutex // guards instances
	instances map[string]*instance
}

var (
	_ sandbox.Backend   = (*Backend)(nil)
	_ sandbox.Meter     = (*Backend)(nil)
	_ sandbox.Networked = (*Backend)(nil)
)

// New checks that setup made the guest's files and builds the jail's tree.
func New(cfg Config) (*Backend, error) {
	if cfg.DataDir == "" || cfg.CacheDir == "" {
		return nil, fmt.Errorf("microvm backend needs a data dir and a cache dir")
	}
	switch cfg.Accel {
	case "":
		cfg.Accel = "kvm"
	case "kvm", "tcg":
	default:
		return nil, fmt.Errorf("microvm accelerator %q: want kvm or tcg", cfg.Accel)
	}
	if cfg.RunDir == "" {
		cfg.RunDir = sandbox.RunDir("/run/withruntime-vm", cfg.DataDir)
	}
	bin := filepath.Join(cfg.CacheDir, "bin")
	root, err := jailRoot(cfg.CacheDir, filepath.Join(bin, "sandbox-agent"), filepath.Join(bin, "microvm-init"))
	if err != nil {
		return nil, err
	}
	base := BaseDisk(cfg.CacheDir, image.Default)
	if !exists(base) {
		return nil, fmt.Errorf("%s is missing: run `withruntime setup`", base)
	}
	cg := hostcgroup.Host(cgroupParent)
	if err := cg.Prepare(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.RunDir, 0o700); err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, root: root, base: base, cg: cg, instances: map[string]*instance{}}
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

// paths of one sandbox.
type paths struct {
	state      string // DataDir/microvm/ID: survives restarts
	disk       string // the sandbox's writable disk
	config     string // the guest's settings, a small read-only disk
	checkpoint string // a paused sandbox's saved machine
	run        string // RunDir/ID
	jail       string // QEMU's root: the read-only tree
	vm         string // mounted at jail/run: QEMU's sockets
	pidFile    string
	netns      string
}

// stateRoot holds every microVM's state dir: apart from the gVisor
// backend's DataDir/sandboxes, whose sweep must not see them.
func (b *Backend) stateRoot() string { return filepath.Join(b.cfg.DataDir, "microvm") }

func (b *Backend) paths(id string) paths {
	state := filepath.Join(b.stateRoot(), id)
	run := filepath.Join(b.cfg.RunDir, id)
	return paths{
		state:      state,
		disk:       filepath.Join(state, "disk.img"),
		config:     filepath.Join(state, "config"),
		checkpoint: filepath.Join(state, "checkpoint"),
		run:        run,
		jail:       filepath.Join(run, "jail"),
		vm:         filepath.Join(run, "vm"),
		pidFile:    filepath.Join(run, "qemu.pid"),
		netns:      filepath.Join(run, "netns"),
	}
}

// Close gives up this backend's share of the packet rules when no sandbox
// of it is live (they go with the last backend of the server that holds
// them).
func (b *Backend) Close() error {
	b.mu.Lock()
	live := b.net.Len() + len(b.instances)
	b.mu.Unlock()
	if live > 0 {
		return nil
	}
	var err error
	if b.plumb != nil {
		err = b.plumb.Uninstall()
	}
	// Empty once no sandbox is left (a sandbox's own directory goes with
	// it); Remove takes only an empty one.
	if rerr := os.Remove(b.cfg.RunDir); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && !errors.Is(rerr, syscall.ENOTEMPTY) {
		err = errors.Join(err, rerr)
	}
	return err
}
