//go:build unix

package cli

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// notifyWriter closes seen on its first write.
type notifyWriter struct {
	buf  bytes.Buffer // not embedded: its WriteString would bypass Write
	once sync.Once
	seen chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	w.once.Do(func() { close(w.seen) })
	return n, err
}

// TestRunInterrupted sends this process a real SIGINT while "sandbox run"
// waits for its command, as Ctrl-C would.
func TestRunInterrupted(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	f.onExec = func(w http.ResponseWriter, r *http.Request) {
		streamEvents(w, api.ExecEvent{Type: "start", Pid: 1}, api.ExecEvent{Type: "stdout", Data: "working\n"})
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	stdout := &notifyWriter{seen: make(chan struct{})}
	// Once the command's output is out, Main's handler for SIGINT is in
	// place: it is registered before the sandbox is created.
	go func() {
		select {
		case <-stdout.seen:
			syscall.Kill(syscall.Getpid(), syscall.SIGINT)
		case <-time.After(10 * time.Second):
		}
	}()
	var stderr bytes.Buffer
	code := (&App{}).Main([]string{"sandbox", "run", "--", "sleep", "1000"}, strings.NewReader(""), stdout, &stderr)
	if code != 130 {
		t.Fatalf("exit code: got %d, want 130 (stderr %q)", code, stderr.String())
	}
	if got := stdout.buf.String(); got != "working\n" {
		t.Errorf("stdout: got %q", got)
	}
	checkStderr(t, stderr.String(), "error: canceled: interrupt signal received\n")
	if _, _, stopped := f.snapshot(); len(stopped) != 1 {
		t.Errorf("sandbox not stopped after the interrupt: %v", stopped)
	}
}
