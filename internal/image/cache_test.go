package image

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A long build keeps saying that it runs, and says nothing once stopped.
func TestHeartbeat(t *testing.T) {
	var out lockedBuffer
	stop := heartbeat(&out, "k1", 10*time.Millisecond)
	for !strings.Contains(out.String(), "image k1: still building") {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	n := len(out.String())
	time.Sleep(50 * time.Millisecond)
	if got := len(out.String()); got != n {
		t.Fatalf("got %d bytes after stop, want %d: %q", got, n, out.String())
	}
}
