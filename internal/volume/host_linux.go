package volume

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// SandboxUID owns a new volume's root directory: the images' sandbox user
// (internal/image), so that commands run as it may write there.
const SandboxUID = 1000

// Host keeps the volumes' images and their mounts on one host.
type Host struct {
	images string // DATA/volumes: <id>.img
	mounts string // RUN/volumes: <id>/, the mount points

	mu      sync.Mutex
	mounted map[string]bool // guarded by mu: ids mounted by this Host
}

// OpenHost makes the dirs (mode 0700) and returns a Host over them.
func OpenHost(imagesDir, mountsDir string) (*Host, error) {
	for _, d := range []string{imagesDir, mountsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, err
		}
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("volumes need %s (e2fsprogs, util-linux): %w", tool, err)
		}
	}
	return &Host{images: imagesDir, mounts: mountsDir, mounted: map[string]bool{}}, nil
}

// ValidID reports whether id is a volume id as NewID makes them: the only
// names a host path is built from.
func ValidID(id string) bool {
	if len(id) != 20 || !strings.HasPrefix(id, "vol_") {
		return false
	}
	_, err := hex.DecodeString(id[4:])
	return err == nil
}

func (h *Host) image(id string) string { return filepath.Join(h.images, id+".img") }

// Dir is the host directory where volume id is mounted.
func (h *Host) Dir(id string) string { return filepath.Join(h.mounts, id) }

// Create makes volume id's image, sizeGiB sparse, and mounts it.
func (h *Host) Create(ctx context.Context, id string, sizeGiB int) (retErr error) {
	if !ValidID(id) {
		return fmt.Errorf("bad volume id %q", id)
	}
	img := h.image(id)
	f, err := os.OpenFile(img, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			os.Remove(img)
		}
	}()
	err = f.Truncate(int64(sizeGiB) << 30)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sizing volume image: %w", err)
	}
	// No blocks reserved for root (every byte is the sandbox's), inode
	// tables and journal zeroed lazily: the image stays sparse.
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0",
		"-E", fmt.Sprintf("lazy_itable_init=1,lazy_journal_init=1,root_owner=%d:%d", SandboxUID, SandboxUID),
		img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := h.Mount(ctx, id); err != nil {
		return err
	}
	// A fresh file system's lost+found is mkfs's, not the user's.
	if err := unix.Rmdir(filepath.Join(h.Dir(id), "lost+found")); err != nil && !errors.Is(err, unix.ENOENT) {
		h.Unmount(id)
		return fmt.Errorf("tidying new volume: %w", err)
	}
	return nil
}

// Mount mounts volume id's image at Dir(id) unless this Host has.
func (h *Host) Mount(ctx context.Context, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("bad volume id %q", id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mounted[id] {
		return nil
	}
	dir := h.Dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	// A mount left by a process that died: take it over as it is.
	if mountedAt(dir) {
		h.mounted[id] = true
		return nil
	}
	out, err := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noexec", h.image(id), dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mounting volume %s: %w: %s", id, err, strings.TrimSpace(string(out)))
	}
	h.mounted[id] = true
	return nil
}

// mountedAt reports whether dir is a mount point (its device differs from
// its parent's).
func mountedAt(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// Unmount unmounts volume id (its loop device goes with it: mount -o loop
// sets autoclear).
func (h *Host) Unmount(id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unmountLocked(id)
}

func (h *Host) unmountLocked(id string) error {
	dir := h.Dir(id)
	if mountedAt(dir) {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting volume %s: %w", id, err)
		}
	}
	delete(h.mounted, id)
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Remove unmounts volume id and deletes its image.
func (h *Host) Remove(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("bad volume id %q", id)
	}
	if err := h.Unmount(id); err != nil {
		return err
	}
	if err := os.Remove(h.image(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Used returns the bytes in use in volume id's file system.
func (h *Host) Used(id string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(h.Dir(id), &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}

// Allocated returns the bytes of the host's disk volume id's image holds.
func (h *Host) Allocated(id string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(h.image(id), &st); err != nil {
		return 0, err
	}
	return st.Blocks * 512, nil
}

// Close unmounts every volume this Host mounted.
func (h *Host) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for id := range h.mounted {
		errs = append(errs, h.unmountLocked(id))
	}
	return errors.Join(errs...)
}
