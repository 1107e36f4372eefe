package manager

import (
	"context"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

const (
	maxMetadata      = 64
	maxMetadataKey   = 128
	maxMetadataValue = 1024
	maxEnv           = 256
	maxEnvValue      = 32 << 10
)

func invalid(format string, args ...any) error {
	return sandbox.Errorf(sandbox.KindInvalid, format, args...)
}

// specFor validates a create request of account (as the API edge
// converted it, internal/httpapi) and turns it into a Spec, with the
// defaults of the template it names.
func (m *Manager) specFor(ctx context.Context, account string, req service.CreateRequest) (sandbox.Spec, error) {
	req, t, err := m.withTemplate(ctx, account, req)
	if err != nil {
		return sandbox.Spec{}, err
	}
	s, err := m.checkSpec(req)
	if err != nil || t == nil {
		return s, err
	}
	s.Root = &sandbox.Root{Template: t.ID, Base: t.Base, Layers: t.Layers}
	return s, withDefaults(&s, t.Defaults)
}

// checkSpec checks the values of a create request whose image is resolved.
func (m *Manager) checkSpec(req service.CreateRequest) (sandbox.Spec, error) {
	c := &m.cfg
	netPolicy, err := m.networkFor(req.Network)
	if err != nil {
		return sandbox.Spec{}, err
	}
	if req.MaxCostMicros != nil && *req.MaxCostMicros < 0 {
		return sandbox.Spec{}, invalid("max_cost_micros must not be negative, got %d", *req.MaxCostMicros)
	}
	iso, err := m.isolationFor(req.Isolation)
	if err != nil {
		return sandbox.Spec{}, err
	}
	s := sandbox.Spec{
		Isolation:  iso,
		Image:      req.Image,
		VCPUs:      req.VCPUs,
		MemoryMiB:  req.MemoryMiB,
		DiskMiB:    c.DiskMiB,
		PidsLimit:  c.PidsLimit,
		Timeout:    time.Duration(req.TimeoutSeconds) * time.Second,
		OnLeaseEnd: req.OnLeaseEnd,
		AutoResume: req.AutoResume,
		Env:        req.Env,
		Metadata:   req.Metadata,

		Network:       netPolicy,
		MaxCostMicros: req.MaxCostMicros,
		Volumes:       req.Volumes,
	}
	if len(s.Volumes) > 0 && s.Isolation != sandbox.IsolationGVisor && s.Isolation != sandbox.IsolationMicroVM {
		return s, sandbox.Errorf(sandbox.KindNotSupported, "volumes are not supported on isolation %s: use isolation %s or %s", s.Isolation, sandbox.IsolationGVisor, sandbox.IsolationMicroVM)
	}
	if req.VCPUs == 0 {
		s.VCPUs = c.DefaultVCPUs
	}
	if s.VCPUs < c.MinVCPUs || s.VCPUs > c.MaxVCPUs {
		return s, invalid("vcpus must be between %d and %d, got %d", c.MinVCPUs, c.MaxVCPUs, s.VCPUs)
	}
	if req.MemoryMiB == 0 {
		s.MemoryMiB = c.DefaultMemoryMiB
	}
	if s.MemoryMiB < c.MinMemoryMiB || s.MemoryMiB > c.MaxMemoryMiB {
		return s, invalid("memory_mib must be between %d and %d, got %d", c.MinMemoryMiB, c.MaxMemoryMiB, s.MemoryMiB)
	}
	if d := req.DiskGiB; d != nil {
		if *d < 1 || *d > c.MaxDiskGiB {
			return s, invalid("disk_gib must be between 1 and %d, got %d", c.MaxDiskGiB, *d)
		}
		s.DiskMiB = *d << 10
	}
	if req.TimeoutSeconds == 0 {
		s.Timeout = c.DefaultTimeout
	}
	if err := m.checkTimeout(req.TimeoutSeconds, s.Timeout); err != nil {
		return s, err
	}
	switch s.OnLeaseEnd {
	case "":
		s.OnLeaseEnd = sandbox.OnLeaseEndStop
	case sandbox.OnLeaseEndStop, sandbox.OnLeaseEndPause:
	default:
		return s, invalid("on_lease_end must be %q or %q, got %q", sandbox.OnLeaseEndStop, sandbox.OnLeaseEndPause, req.OnLeaseEnd)
	}
	if err := pausable(s); err != nil && (s.OnLeaseEnd == sandbox.OnLeaseEndPause || s.AutoResume) {
		return s, err
	}
	if len(s.Env) > maxEnv {
		return s, invalid("at most %d environment variables", maxEnv)
	}
	for k, v := range s.Env {
		if !sandbox.EnvName(k) || strings.ContainsRune(v, 0) || len(v) > maxEnvValue {
			return s, invalid("bad environment variable %q: names are letters, digits and _, not starting with a digit; values at most %d bytes without NUL", k, maxEnvValue)
		}
	}
	if len(s.Metadata) > maxMetadata {
		return s, invalid("at most %d metadata entries", maxMetadata)
	}
	for k, v := range s.Metadata {
		if k == "" || len(k) > maxMetadataKey || len(v) > maxMetadataValue || strings.ContainsRune(k+v, 0) {
			return s, invalid("bad metadata entry %q: keys 1-%d bytes, values at most %d bytes, no NUL", k, maxMetadataKey, maxMetadataValue)
		}
	}
	return s, nil
}

func (m *Manager) checkTimeout(seconds int, d time.Duration) error {
	if seconds < 0 || d <= 0 || d > m.cfg.MaxTimeout {
		return invalid("timeout_seconds must be between 1 and %d, got %d", int(m.cfg.MaxTimeout/time.Second), seconds)
	}
	return nil
}

// pausable refuses a pause the sandbox's spec rules out: a microVM's
// volumes are served over vhost-user, whose device QEMU cannot migrate,
// so such a machine cannot be saved. A create that would need it (a pause
// at the lease's end, auto-resume) is refused, not stopped later.
func pausable(s sandbox.Spec) error {
	if s.Isolation == sandbox.IsolationMicroVM && len(s.Volumes) > 0 {
		return sandbox.Errorf(sandbox.KindNotSupported, "a microVM that mounts volumes cannot be paused (its virtio-fs devices cannot be saved): use on_lease_end %q without auto_resume, or isolation %s", sandbox.OnLeaseEndStop, sandbox.IsolationGVisor)
	}
	return nil
}
