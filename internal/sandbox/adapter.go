package sandbox

import (
	"context"
	"io"
	"net/netip"
	"time"
)

// Capability is one of a backend's optional capabilities: an interface of
// this package (Meter, Warmer, Networked, Freezer, CheckpointDigester,
// RootExporter) that a backend may implement besides Backend.
type Capability string

const (
	CapMeter    Capability = "meter"    // Meter
	CapWarm     Capability = "warm"     // Warmer
	CapNetwork  Capability = "network"  // Networked
	CapFreeze   Capability = "freeze"   // Freezer
	CapDigest   Capability = "digest"   // CheckpointDigester
	CapExport   Capability = "export"   // RootExporter
	CapSnapshot Capability = "snapshot" // Snapshotter
)

// Adapter is a Backend with every optional capability as a method, so
// that its callers (the manager, Multi) never ask a backend what it
// implements: the adapter is the one place that does. A capability the
// backend lacks answers as the platform treats a backend without it (see
// each method), or with a KindNotSupported error where there is no such
// answer; Supports tells which, for a caller whose path differs.
type Adapter struct {
	Backend
	meter  Meter
	warm   Warmer
	net    Networked
	freeze Freezer
	digest CheckpointDigester
	export RootExporter
	snap   Snapshotter
}

// Adapt wraps b in an Adapter; an Adapter is returned as it is.
func Adapt(b Backend) *Adapter {
	if a, ok := b.(*Adapter); ok {
		return a
	}
	a := &Adapter{Backend: b}
	a.meter, _ = b.(Meter)
	a.warm, _ = b.(Warmer)
	a.net, _ = b.(Networked)
	a.freeze, _ = b.(Freezer)
	a.digest, _ = b.(CheckpointDigester)
	a.export, _ = b.(RootExporter)
	a.snap, _ = b.(Snapshotter)
	return a
}

// Unwrap is the backend the adapter wraps.
func (a *Adapter) Unwrap() Backend { return a.Backend }

// Supports reports whether the backend implements capability c itself.
func (a *Adapter) Supports(c Capability) bool {
	switch c {
	case CapMeter:
		return a.meter != nil
	case CapWarm:
		return a.warm != nil
	case CapNetwork:
		return a.net != nil
	case CapFreeze:
		return a.freeze != nil
	case CapDigest:
		return a.digest != nil
	case CapExport:
		return a.export != nil
	case CapSnapshot:
		return a.snap != nil
	}
	return false
}

// unsupported is the error of a capability the backend lacks.
func (a *Adapter) unsupported(what string) error {
	return Errorf(KindNotSupported, "the %s isolation cannot %s", a.Name(), what)
}

// Offered lists the isolations the backend runs: a Multi's, else the
// backend's own name.
func (a *Adapter) Offered() []string {
	if m, ok := a.Backend.(interface{ Offered() []string }); ok {
		return m.Offered()
	}
	return []string{a.Name()}
}

// CPUTime of a backend that is no Meter is always 0: its sandboxes are
// billed for memory only (an error would fail the claims of pool members,
// which read the counter).
func (a *Adapter) CPUTime(id string) (time.Duration, error) {
	if a.meter == nil {
		return 0, nil
	}
	return a.meter.CPUTime(id)
}

// StartWarm of a backend that is no Warmer starts the sandbox like any.
func (a *Adapter) StartWarm(ctx context.Context, id string, spec Spec) (Instance, error) {
	if a.warm == nil {
		return a.Start(ctx, id, spec)
	}
	return a.warm.StartWarm(ctx, id, spec)
}

// Claim of a backend that is no Warmer does nothing: its pool members
// were started at the normal priority.
func (a *Adapter) Claim(ctx context.Context, id string) error {
	if a.warm == nil {
		return nil
	}
	return a.warm.Claim(ctx, id)
}

// SandboxAddr of a backend that is not Networked finds no address.
func (a *Adapter) SandboxAddr(id string) (netip.Addr, bool) {
	if a.net == nil {
		return netip.Addr{}, false
	}
	return a.net.SandboxAddr(id)
}

// SetOnline fails with KindNotSupported on a backend that is not
// Networked.
func (a *Adapter) SetOnline(id string, online bool) error {
	if a.net == nil {
		return a.unsupported("give sandboxes a network")
	}
	return a.net.SetOnline(id, online)
}

// Freeze fails with KindNotSupported on a backend that is no Freezer.
func (a *Adapter) Freeze(ctx context.Context, id string) error {
	if a.freeze == nil {
		return a.unsupported("freeze sandboxes")
	}
	return a.freeze.Freeze(ctx, id)
}

// Thaw fails with KindNotSupported on a backend that is no Freezer.
func (a *Adapter) Thaw(ctx context.Context, id string) error {
	if a.freeze == nil {
		return a.unsupported("thaw sandboxes")
	}
	return a.freeze.Thaw(ctx, id)
}

// CheckpointDigest is "" for a backend that takes no digests: it is
// resumed without one being checked.
func (a *Adapter) CheckpointDigest(id string) string {
	if a.digest == nil {
		return ""
	}
	return a.digest.CheckpointDigest(id)
}

// ResumeDigest of a backend that takes no digests is Resume when digest
// is "", and refuses any other digest (KindNotSupported) rather than
// resume a shared checkpoint unchecked.
func (a *Adapter) ResumeDigest(ctx context.Context, id string, spec Spec, digest string) (Instance, error) {
	if a.digest != nil {
		return a.digest.ResumeDigest(ctx, id, spec, digest)
	}
	if digest == "" {
		return a.Resume(ctx, id, spec)
	}
	return nil, a.unsupported("check a checkpoint's digest")
}

// ExportRoot fails with KindNotSupported on a backend that is no
// RootExporter.
func (a *Adapter) ExportRoot(ctx context.Context, id string, w io.Writer) error {
	if a.export == nil {
		return a.unsupported("snapshot a sandbox's file system")
	}
	return a.export.ExportRoot(ctx, id, w)
}

// Close closes a backend that has a Close; others have nothing to close.
func (a *Adapter) Close() error {
	if c, ok := a.Backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// The Adapter offers every capability, whatever it wraps.
var (
	_ Meter              = (*Adapter)(nil)
	_ Warmer             = (*Adapter)(nil)
	_ Networked          = (*Adapter)(nil)
	_ Freezer            = (*Adapter)(nil)
	_ CheckpointDigester = (*Adapter)(nil)
	_ RootExporter       = (*Adapter)(nil)
	_ io.Closer          = (*Adapter)(nil)
)

// Snapshot fails with KindNotSupported on a backend that is no
// Snapshotter.
func (a *Adapter) Snapshot(ctx context.Context, id, dir string) error {
	if a.snap == nil {
		return a.unsupported("snapshot a running sandbox")
	}
	return a.snap.Snapshot(ctx, id, dir)
}

// StartSnapshot fails with KindNotSupported on a backend that is no
// Snapshotter.
func (a *Adapter) StartSnapshot(ctx context.Context, id string, spec Spec, dir string) (Instance, error) {
	if a.snap == nil {
		return nil, a.unsupported("start a sandbox from a snapshot")
	}
	return a.snap.StartSnapshot(ctx, id, spec, dir)
}
