package server

import (
	"log/slog"
	"syscall"
)

// raiseFileLimit sets the soft RLIMIT_NOFILE to the hard limit and logs
// it: every proxied connection of every sandbox holds two descriptors.
// (Go raises the soft limit at start on Linux too; this says so, and
// holds if that ever changes.)
func raiseFileLimit(log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("reading the open files limit", "err", err)
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("raising the open files limit", "err", err)
		}
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	log.Info("open files limit", "soft", lim.Cur, "hard", lim.Max)
}

// fileLimit is the soft RLIMIT_NOFILE now.
func fileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}
