package manager

import "log/slog"

// sandboxLogger puts sandbox_id on every line about a sandbox.
type sandboxLogger struct{ l *slog.Logger }

func (s *sandboxLogger) info(id, msg string, args ...any) {
	s.l.Info(msg, append([]any{"sandbox_id", id}, args...)...)
}

func (s *sandboxLogger) warn(id, msg string, err error) {
	s.l.Warn(msg, "sandbox_id", id, "err", err)
}
