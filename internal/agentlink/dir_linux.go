package agentlink

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Dir is the host directory that holds a sandbox's end of the link: the
// listening socket and the resume flag. The sandbox sees it read-only; the
// host still touches it only through a descriptor opened without following
// symlinks, and every entry relative to it, never by name.
type Dir struct {
	fd int
}

// OpenDir opens (making it, mode 0700) the directory at path. The last
// component must be a real directory, not a symlink.
func OpenDir(path string) (*Dir, error) {
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return &Dir{fd: fd}, nil
}

// Close releases the directory's descriptor.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Listen replaces whatever is at SockName with a new listening socket,
// mode 0600, and serves the link on it.
func (d *Dir) Listen() (*Host, error) {
	if err := d.remove(SockName); err != nil {
		return nil, err
	}
	// bind(2) takes a path: this one reaches the directory through its
	// descriptor, so no component of it is looked up by name.
	path := "/proc/self/fd/" + strconv.Itoa(d.fd) + "/" + SockName
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening for the agent: %w", err)
	}
	l.SetUnlinkOnClose(false)
	// fchmodat follows symlinks (Linux has no AT_SYMLINK_NOFOLLOW for it
	// before fchmodat2): make sure the name is the socket just bound.
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, SockName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		l.Close()
		return nil, fmt.Errorf("listening for the agent: %s is not the socket just made", SockName)
	}
	if err := unix.Fchmodat(d.fd, SockName, 0o600, 0); err != nil {
		l.Close()
		return nil, err
	}
	return Serve(l), nil
}

// SetResume creates the resume flag, a new empty file in place of
// whatever was there.
func (d *Dir) SetResume() error {
	if err := d.remove(ResumeName); err != nil {
		return err
	}
	fd, err := unix.Openat(d.fd, ResumeName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("creating the resume flag: %w", err)
	}
	return unix.Close(fd)
}

// ClearResume removes the resume flag.
func (d *Dir) ClearResume() error { return d.remove(ResumeName) }

func (d *Dir) remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing %s: %w", name, err)
	}
	return nil
}
