//go:build unix

package cli

import (
	"os"
	"os/signal"
	"syscall"
)

// followWindowSize calls resize at each SIGWINCH (this terminal's size
// changed) until the returned stop.
func followWindowSize(resize func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				resize()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
