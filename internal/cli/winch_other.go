//go:build !unix

package cli

// followWindowSize does nothing where there is no SIGWINCH: the terminal
// keeps the size it started with.
func followWindowSize(resize func()) (stop func()) { return func() {} }
