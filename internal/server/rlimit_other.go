//go:build !linux

package server

import "log/slog"

// raiseFileLimit is a no-op off Linux, where the server does not run.
func raiseFileLimit(*slog.Logger) {}
