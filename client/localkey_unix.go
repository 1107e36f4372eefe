//go:build unix

package client

import (
	"errors"
	"os"
	"syscall"
)

// openNoFollow opens path for reading, refusing a symbolic link as its
// last element, and without blocking on a FIFO put in its place.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// fileOwner returns the uid owning fi.
func fileOwner(fi os.FileInfo) (int, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.ErrUnsupported
	}
	return int(st.Uid), nil
}
