//go:build !unix

package client

import (
	"errors"
	"os"
)

// Without file owners (Windows) the local key is never read: who may
// receive it cannot be checked.

func openNoFollow(string) (*os.File, error) { return nil, errors.ErrUnsupported }

func fileOwner(os.FileInfo) (int, error) { return 0, errors.ErrUnsupported }
