package volume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/storagequota"
	"github.com/withruntime/withruntime/internal/store"
)

// Records is what the service keeps and reads in the store: the volumes,
// and the sandboxes that mount them.
type Records interface {
	store.Volumes
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Record, error)
}

// Config is a Service's settings.
type Config struct {
	Store Records
	Host  *Host
	// Node is the node that holds the images ("" on a single box).
	Node string
	// MaxSizeGiB bounds one volume (DefaultMaxSizeGiB when 0).
	MaxSizeGiB int
	// Quota is the accounts' storage quota; the service counts its
	// volumes' sizes there (nil: no quota).
	Quota *storagequota.Quota
	// DiskPromised is the bytes of the data dir's free space the live
	// sandboxes' disks hold (the manager's DiskPromised); nil: none.
	DiskPromised func() int64
	Logger       *slog.Logger
	Now          func() time.Time
}

// Service is the volumes of one host: their records, images, mounts and
// files.
type Service struct {
	cfg Config
	// mu serializes the changes of the volumes and the checks of their
	// mounts (create, delete, a sandbox's create), and guards pending.
	mu sync.Mutex
	// pending counts, by volume id, the mounts of sandboxes being created:
	// their records are not live yet.
	pending map[string]*claim
}

type claim struct{ writers, readers int }

// View is a volume as the API shows it.
type View struct {
	store.Volume
	UsedBytes int64
	MountedBy []string
}

// NewService returns the service over cfg.Host and mounts every volume
// the store holds for this node.
func NewService(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.MaxSizeGiB == 0 {
		cfg.MaxSizeGiB = DefaultMaxSizeGiB
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, pending: map[string]*claim{}}
	if cfg.Quota != nil {
		cfg.Quota.Add("volumes", s.Bytes)
	}
	vols, err := cfg.Store.ListVolumes(ctx, "")
	if err != nil {
		return nil, err
	}
	// Paused sandboxes restore onto their volumes' mounts: each is mounted
	// while the server runs.
	for _, v := range vols {
		if v.Node != cfg.Node {
			continue
		}
		if err := cfg.Host.Mount(ctx, v.ID); err != nil {
			cfg.Logger.Error("volume not mounted", "volume", v.ID, "err", err)
		}
	}
	return s, nil
}

// Close unmounts the volumes no live or paused sandbox mounts, releasing
// their loop devices. The others stay mounted: their sandboxes outlive
// the server (the next one reattaches them), and the next server takes
// the mounts over as they are, never mounting one image twice.
func (s *Service) Close(ctx context.Context) error {
	vols, err := s.cfg.Store.ListVolumes(ctx, "")
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range vols {
		if v.Node != s.cfg.Node {
			continue
		}
		if by, _, err := s.mounters(ctx, v.Account, v.ID); err != nil || len(by) > 0 {
			continue
		}
		errs = append(errs, s.cfg.Host.Unmount(v.ID))
	}
	return errors.Join(errs...)
}

// Bytes is account's volumes' sizes: what its storage quota counts.
func (s *Service) Bytes(ctx context.Context, account string) (int64, error) {
	return QuotaSource(s.cfg.Store)(ctx, account)
}

// QuotaSource is what an account's volumes take of its storage quota:
// their whole sizes, from the store's records, so on many hosts every
// node's volumes count wherever the quota is checked.
func QuotaSource(st store.Volumes) storagequota.Source {
	return func(ctx context.Context, account string) (int64, error) {
		vols, err := st.ListVolumes(ctx, account)
		if err != nil {
			return 0, err
		}
		var n int64
		for _, v := range vols {
			n += int64(v.SizeGiB) << 30
		}
		return n, nil
	}
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "vol_" + hex.EncodeToString(b[:])
}

// Create makes account's volume name of sizeGiB.
func (s *Service) Create(ctx context.Context, account, name string, sizeGiB int) (*View, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if sizeGiB < 1 || sizeGiB > s.cfg.MaxSizeGiB {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "size_gib must be between 1 and %d, got %d", s.cfg.MaxSizeGiB, sizeGiB)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.cfg.Store.GetVolume(ctx, account, name); err == nil {
		return nil, sandbox.Errorf(sandbox.KindConflict, "a volume named %s exists", name)
	}
	size := int64(sizeGiB) << 30
	if err := s.cfg.Quota.Check(ctx, account, size); err != nil {
		return nil, err
	}
	if err := s.admitDisk(ctx, size); err != nil {
		return nil, err
	}
	v := store.Volume{ID: newID(), Account: account, Name: name, SizeGiB: sizeGiB, CreatedAt: s.cfg.Now().UTC().Truncate(time.Millisecond), Node: s.cfg.Node}
	if err := s.cfg.Host.Create(context.WithoutCancel(ctx), v.ID, sizeGiB); err != nil {
		return nil, fmt.Errorf("making volume %s: %w", name, err)
	}
	if err := s.cfg.Store.PutVolume(ctx, v); err != nil {
		s.cfg.Host.Remove(v.ID)
		return nil, err
	}
	return s.view(ctx, v, nil)
}

// admitDisk refuses a volume of size when the data dir's file system could
// not hold it besides what is promised already: the live sandboxes' disks
// and every volume's unwritten rest (the images are sparse).
func (s *Service) admitDisk(ctx context.Context, size int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(s.cfg.Host.images, &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * st.Bsize
	if s.cfg.DiskPromised != nil {
		free -= s.cfg.DiskPromised()
	}
	vols, err := s.cfg.Store.ListVolumes(ctx, "")
	if err != nil {
		return err
	}
	for _, v := range vols {
		if v.Node != s.cfg.Node {
			continue
		}
		alloc, err := s.cfg.Host.Allocated(v.ID)
		if err != nil {
			continue
		}
		free -= max(0, int64(v.SizeGiB)<<30-alloc)
	}
	if size > free {
		return sandbox.Errorf(sandbox.KindCapacityExhausted, "the host's disk cannot hold a volume of %d GiB besides what it has promised", size>>30)
	}
	return nil
}

// mounters returns the live and paused sandboxes of account that mount
// volume id, and whether one of them mounts it writable.
func (s *Service) mounters(ctx context.Context, account, id string) (ids []string, writer bool, err error) {
	recs, err := s.cfg.Store.ListSandboxes(ctx, store.SandboxFilter{
		Account: account, States: []sandbox.State{sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused},
	})
	if err != nil {
		return nil, false, err
	}
	for _, r := range recs {
		for _, m := range r.Spec.Volumes {
			if m.ID == id {
				ids = append(ids, r.ID)
				writer = writer || !m.ReadOnly
			}
		}
	}
	return ids, writer, nil
}

func (s *Service) view(ctx context.Context, v store.Volume, by []string) (*View, error) {
	if by == nil {
		var err error
		if by, _, err = s.mounters(ctx, v.Account, v.ID); err != nil {
			return nil, err
		}
	}
	out := &View{Volume: v, MountedBy: by}
	if out.MountedBy == nil {
		out.MountedBy = []string{}
	}
	if used, err := s.cfg.Host.Used(v.ID); err == nil {
		out.UsedBytes = used
	}
	return out, nil
}

// Get returns account's volume name.
func (s *Service) Get(ctx context.Context, account, name string) (*View, error) {
	v, err := s.get(ctx, account, name)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, *v, nil)
}

// get is account's volume name, mounted on this host.
func (s *Service) get(ctx context.Context, account, name string) (*store.Volume, error) {
	if !ValidName(name) {
		return nil, volumeNotFound(name)
	}
	v, err := s.cfg.Store.GetVolume(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if v.Node != s.cfg.Node {
		return nil, sandbox.Errorf(sandbox.KindCapacityExhausted, "volume %s is on node %s, not this one", name, v.Node)
	}
	if err := s.cfg.Host.Mount(ctx, v.ID); err != nil {
		return nil, err
	}
	return v, nil
}

func volumeNotFound(name string) error {
	return sandbox.Errorf(sandbox.KindNotFound, "volume %s not found", name)
}

// List returns account's volumes by name.
func (s *Service) List(ctx context.Context, account string) ([]View, error) {
	vols, err := s.cfg.Store.ListVolumes(ctx, account)
	if err != nil {
		return nil, err
	}
	out := make([]View, 0, len(vols))
	for _, v := range vols {
		vw, err := s.view(ctx, v, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, *vw)
	}
	return out, nil
}

// Delete removes account's volume name and its bytes; refused (conflict)
// while a live or paused sandbox mounts it, or one being created will.
func (s *Service) Delete(ctx context.Context, account, name string) error {
	if !ValidName(name) {
		return volumeNotFound(name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.cfg.Store.GetVolume(ctx, account, name)
	if err != nil {
		return err
	}
	by, _, err := s.mounters(ctx, account, v.ID)
	if err != nil {
		return err
	}
	if len(by) > 0 || s.pending[v.ID] != nil {
		return sandbox.Errorf(sandbox.KindConflict, "volume %s is mounted by %v: end those sandboxes first", name, by)
	}
	if err := s.cfg.Store.DeleteVolume(ctx, account, name); err != nil {
		return err
	}
	if err := s.cfg.Host.Remove(v.ID); err != nil {
		s.cfg.Logger.Error("volume's image not removed", "volume", v.ID, "err", err)
	}
	return nil
}

// Resolve checks the volumes a create of account asks for and claims
// them: each must exist, and a writable mount of a volume another
// sandbox mounts writable (or is being created to) is a conflict. The
// caller calls release once the sandbox's record is live (or the create
// failed).
func (s *Service) Resolve(ctx context.Context, account string, ms []Mount) (out []sandbox.VolumeMount, release func(), err error) {
	if len(ms) == 0 {
		return nil, func() {}, nil
	}
	if err := CheckMounts(ms); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range ms {
		v, err := s.get(ctx, account, m.Name)
		if err != nil {
			return nil, nil, err
		}
		if !m.ReadOnly {
			_, writer, err := s.mounters(ctx, account, v.ID)
			if err != nil {
				return nil, nil, err
			}
			if c := s.pending[v.ID]; writer || c != nil && c.writers > 0 {
				return nil, nil, sandbox.Errorf(sandbox.KindConflict, "volume %s is mounted writable by another sandbox: one writer at a time (mount it read_only)", m.Name)
			}
		}
		out = append(out, sandbox.VolumeMount{ID: v.ID, Name: v.Name, Path: m.Path, ReadOnly: m.ReadOnly, HostDir: s.cfg.Host.Dir(v.ID)})
	}
	for _, m := range out {
		c := s.pending[m.ID]
		if c == nil {
			c = &claim{}
			s.pending[m.ID] = c
		}
		if m.ReadOnly {
			c.readers++
		} else {
			c.writers++
		}
	}
	var once sync.Once
	return out, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, m := range out {
				c := s.pending[m.ID]
				if m.ReadOnly {
					c.readers--
				} else {
					c.writers--
				}
				if c.readers == 0 && c.writers == 0 {
					delete(s.pending, m.ID)
				}
			}
		})
	}, nil
}

// Open is Host.Open in account's volume name.
func (s *Service) Open(ctx context.Context, account, name, p string) (*Opened, error) {
	v, err := s.get(ctx, account, name)
	if err != nil {
		return nil, err
	}
	return s.cfg.Host.Open(v.ID, p, int64(v.SizeGiB)<<30)
}

// Write is Host.Write in account's volume name, bounded by its size.
func (s *Service) Write(ctx context.Context, account, name, p string, r io.Reader) (int64, error) {
	v, err := s.get(ctx, account, name)
	if err != nil {
		return 0, err
	}
	return s.cfg.Host.Write(v.ID, p, r, int64(v.SizeGiB)<<30)
}

// Remove is Host.RemovePath in account's volume name.
func (s *Service) Remove(ctx context.Context, account, name, p string) error {
	v, err := s.get(ctx, account, name)
	if err != nil {
		return err
	}
	return s.cfg.Host.RemovePath(v.ID, p)
}

// Archive is Host.TarOut of account's volume name, bounded by its size.
func (s *Service) Archive(ctx context.Context, account, name, p string, w io.Writer) error {
	v, err := s.get(ctx, account, name)
	if err != nil {
		return err
	}
	return s.cfg.Host.TarOut(v.ID, p, w, int64(v.SizeGiB)<<30)
}

// Extract is Host.TarIn into account's volume name, bounded by its size.
func (s *Service) Extract(ctx context.Context, account, name, p string, r io.Reader) error {
	v, err := s.get(ctx, account, name)
	if err != nil {
		return err
	}
	return s.cfg.Host.TarIn(v.ID, p, r, int64(v.SizeGiB)<<30)
}
