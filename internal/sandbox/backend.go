package sandbox

import (
	"context"
	"io"
	"net"
	"net/netip"
	"time"
)

// Backend is the seam between the platform and an isolation technology
// (gVisor, a QEMU microVM; each registers itself: registry.go). A backend
// turns a Spec into a running, isolated machine whose in-sandbox agent can
// be dialed, and removes every trace of it on Destroy. Its optional
// capabilities (Meter, Warmer, Networked, Freezer, CheckpointDigester)
// are reached through an Adapter, never asked for by its callers.
type Backend interface {
	// Name is the registered name of the backend.
	Name() string
	// Start boots sandbox id and returns once its agent answers.
	Start(ctx context.Context, id string, spec Spec) (Instance, error)
	// Attach finds sandbox id left running by an earlier server process.
	// It fails when the sandbox is gone or does not answer.
	Attach(ctx context.Context, id string, spec Spec) (Instance, error)
	// Pause saves the sandbox's memory, processes and disk and stops it:
	// afterwards it holds no memory or CPU on the host.
	Pause(ctx context.Context, id string) error
	// Resume restores a paused sandbox where it stopped.
	Resume(ctx context.Context, id string, spec Spec) (Instance, error)
	// Destroy stops the sandbox and removes everything it holds on the host
	// (processes, mounts, namespaces, cgroups, files, checkpoints). It is
	// idempotent.
	Destroy(ctx context.Context, id string) error
	// Sweep destroys every trace of sandboxes the backend finds on the host
	// for which keep returns false.
	Sweep(ctx context.Context, keep func(id string) bool) error
}

// Instance is a live sandbox of a backend.
type Instance interface {
	// DialAgent opens a connection to the in-sandbox agent.
	DialAgent(ctx context.Context) (net.Conn, error)
	// Done is closed when the sandbox stops by itself (crash, out of
	// memory, its init exited); Cause then says why.
	Done() <-chan struct{}
	Cause() (EndReason, string)
}

// BackendConfig is what every backend is given.
type BackendConfig struct {
	// DataDir holds per-sandbox state that must survive a restart.
	DataDir string
	// CacheDir holds images and binaries shared by every data dir.
	CacheDir string
	// Egress, when set, wires every sandbox to the host's egress proxy and
	// resolver; without it sandboxes have no network at all.
	Egress *EgressWiring
	// SharedCheckpoints, when set, is a directory every node of an
	// installation mounts: Pause leaves there, under <id>/, everything a
	// Resume needs, so that any node with the same directory (and the
	// same cache) can resume the sandbox; Destroy removes it. Sandboxes
	// that are not paused keep their state in DataDir.
	SharedCheckpoints string
	// Layers finds the stored layers of the templates sandboxes start
	// from (nil: only the built-in image).
	Layers LayerDirs
	// Options are the values of the registered backends' own settings
	// (Registration.Options), by flag name; Option reads one.
	Options map[string]string
}

// LayerDirs finds template layers on this host (internal/layer.Store):
// the directory of a complete layer by its digest.
type LayerDirs interface {
	Dir(digest string) (string, error)
	// StacksDir is where what a backend makes of a whole stack of layers
	// is kept (a microVM's disk of a template), one file per stack.
	StacksDir() string
}

// EgressWiring says where a sandbox's traffic goes on the host.
type EgressWiring struct {
	// Net is the host's side of the sandboxes' network, which the server
	// makes once for every backend it runs: its packet-rule table, the
	// ports of the egress proxy and resolver that a sandbox's TCP and DNS
	// are redirected to, and the pool of sandbox addresses. Each backend
	// installs it when made and uninstalls it when closed, so that the
	// backends of one server share one table and one pool, and the table
	// goes with the last of them.
	Net HostNetwork
	// CABundle is a PEM file of the roots a sandbox trusts: the image's
	// and the platform's own authority (CACert alone).
	CABundle, CACert string
}

// HostNetwork is EgressWiring's Net as the domain sees it (it imports no
// network code): the network package's *Plumbing, which the backends use
// as that type.
type HostNetwork interface {
	Install() error
	Uninstall() error
}

// Networked is the optional capability of a backend whose sandboxes have
// an address on the host's side: the egress services find a sandbox by
// it, and can take a sandbox off the network.
type Networked interface {
	SandboxAddr(id string) (netip.Addr, bool)
	SetOnline(id string, online bool) error
}

// Meter is the optional capability of a backend to tell how much CPU a live
// sandbox has consumed since it started or resumed. Billing needs it; a
// backend without it makes the manager bill memory only.
type Meter interface {
	CPUTime(id string) (time.Duration, error)
}

// Warmer is the optional capability of a backend to boot sandboxes for a
// warm pool: before anyone asks for them, at a low CPU priority, so that
// the live sandboxes' work goes first.
type Warmer interface {
	// StartWarm boots id like Start, at the host's lowest CPU priority.
	StartWarm(ctx context.Context, id string, spec Spec) (Instance, error)
	// Claim gives a sandbox StartWarm booted the CPU priority of any other.
	Claim(ctx context.Context, id string) error
}

// RootExporter is the optional capability of a backend to write what a
// running sandbox changed in its root file system (its writable layer
// over its image) as a tar stream in overlayfs's form: a removed name is
// a character device 0:0, a directory whose lower contents are hidden has
// the xattr trusted.overlay.opaque=y. The sandbox keeps running. What it
// writes is the sandbox's to choose, so the stream is untrusted.
type RootExporter interface {
	ExportRoot(ctx context.Context, id string, w io.Writer) error
}

// Snapshotter is the optional capability of a backend to save a running
// sandbox whole (memory, processes, disk) while it keeps running, and to
// start new sandboxes from what it saved: a snapshot, or a fork. What it
// writes is the backend's own format; the caller keeps the directory and
// never reads it.
type Snapshotter interface {
	// Snapshot writes sandbox id's state into dir, an empty directory of
	// the caller's, and lets the sandbox go on (its processes stop for the
	// time of the save).
	Snapshot(ctx context.Context, id, dir string) error
	// StartSnapshot starts sandbox id from the snapshot in dir, which it
	// leaves as it is (one snapshot starts many sandboxes). spec is the
	// new sandbox's: the snapshot's size and image, with its own network
	// policy and lease. The new sandbox gets an identity of its own
	// (SnapshotReseeds).
	StartSnapshot(ctx context.Context, id string, spec Spec, dir string) (Instance, error)
}

// Freezer is the optional capability of a backend to stop a live
// sandbox's processes where they are and let them go on later, without a
// checkpoint: a node that cannot reach the store freezes what it runs, so
// that nothing acts while another process may be ending its records.
type Freezer interface {
	// Freeze stops every process of sandbox id; it keeps its memory.
	Freeze(ctx context.Context, id string) error
	// Thaw lets a frozen sandbox go on.
	Thaw(ctx context.Context, id string) error
}

// CheckpointDigester is the optional capability of a backend whose
// checkpoints leave the node (shared checkpoints) to have them checked:
// the manager keeps the digest of what Pause wrote in the record
// (Checkpoint.Digest), which only the store holds, and resumes with
// ResumeDigest, so that a checkpoint changed in the shared storage since
// is refused rather than restored.
type CheckpointDigester interface {
	// CheckpointDigest returns the digest of the checkpoint the last
	// Pause of sandbox id on this backend left in shared storage ("" when
	// it left none there).
	CheckpointDigest(id string) string
	// ResumeDigest is Resume that refuses a shared checkpoint whose
	// digest is not digest ("": not checked).
	ResumeDigest(ctx context.Context, id string, spec Spec, digest string) (Instance, error)
}

// Where a sandbox with egress finds the installation's trust: the bundle
// (the image's roots and the platform's authority) and the authority
// alone, whatever the backend.
const (
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	CACertPath   = "/usr/local/share/ca-certificates/withruntime.crt"
)

// CAEnv points the usual clients at the bundle that includes the
// platform's authority: Python's requests and pip, curl, Node.
var CAEnv = []string{
	"SSL_CERT_FILE=" + CABundlePath,
	"REQUESTS_CA_BUNDLE=" + CABundlePath,
	"CURL_CA_BUNDLE=" + CABundlePath,
	"PIP_CERT=" + CABundlePath,
	"NODE_EXTRA_CA_CERTS=" + CACertPath,
}
