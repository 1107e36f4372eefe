//go:build !linux

package network

// setMark does nothing where there are no packet rules to read the mark.
func setMark(int) error { return nil }
