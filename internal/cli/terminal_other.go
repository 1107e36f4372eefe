//go:build !linux && !darwin && !windows

package cli

import (
	"errors"
	"os"
)

// isTerminal reports false: this build cannot turn a terminal's echo off,
// so a secret is never read from one.
func isTerminal(f *os.File) bool { return false }

func echoOff(f *os.File) (restore func(), err error) {
	return nil, errors.New("cannot turn the terminal's echo off on this system")
}
