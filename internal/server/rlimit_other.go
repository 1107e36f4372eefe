//go:build !linux

package server

import (
	"errors"
	"log/slog"
)

// raiseFileLimit is a no-op off Linux, where the server does not run.
func raiseFileLimit(*slog.Logger) {}

// fileLimit is unknown off Linux.
func fileLimit() (uint64, error) { return 0, errors.New("not on Linux") }
