package manager

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statfsFree returns the bytes an unprivileged writer may still use on the
// file system that holds dir.
func statfsFree(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("reading free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
