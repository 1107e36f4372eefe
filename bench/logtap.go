package main

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
)

// poolReady is the server's log message when a warm pool member is booted
// and waiting.
const poolReady = "pool member ready"

// readyEvent is one poolReady record: when it was logged and the boot time
// the server measured.
type readyEvent struct {
	at     time.Time
	bootMs float64
	size   string
	id     string
}

// logTap is the io.Writer under the bench server's JSON logger. It keeps
// the pool's ready records, the only view of the pool's state the server
// gives (the API has none), and counts errors logged.
type logTap struct {
	mu     sync.Mutex
	buf    []byte
	ready  []readyEvent
	errs   []string
	change chan struct{}
}

func newLogTap() *logTap { return &logTap{change: make(chan struct{})} }

func (t *logTap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		t.line(t.buf[:i])
		t.buf = t.buf[i+1:]
	}
	return len(p), nil
}

func (t *logTap) line(b []byte) {
	var r struct {
		Time   time.Time `json:"time"`
		Level  string    `json:"level"`
		Msg    string    `json:"msg"`
		BootMs float64   `json:"boot_ms"`
		Size   any       `json:"size"`
		ID     string    `json:"sandbox"`
	}
	if json.Unmarshal(b, &r) != nil {
		return
	}
	if r.Level == "ERROR" {
		t.errs = append(t.errs, string(b))
	}
	if r.Msg != poolReady {
		return
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	size, _ := json.Marshal(r.Size)
	t.ready = append(t.ready, readyEvent{at: r.Time, bootMs: r.BootMs, size: string(size), id: r.ID})
	close(t.change)
	t.change = make(chan struct{})
}

// readySince counts the ready records logged at or after since.
func (t *logTap) readySince(since time.Time) (int, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.ready {
		if !e.at.Before(since) {
			n++
		}
	}
	return n, t.change
}

// waitReady waits until want ready records are logged at or after since,
// or timeout passes. It returns when the last of them was logged (zero if
// fewer came).
func (t *logTap) waitReady(since time.Time, want int, timeout time.Duration) (time.Time, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		n, ch := t.readySince(since)
		if n >= want {
			return t.nthSince(since, want), true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return time.Time{}, false
		}
	}
}

func (t *logTap) nthSince(since time.Time, n int) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.ready {
		if !e.at.Before(since) {
			if n--; n == 0 {
				return e.at
			}
		}
	}
	return time.Time{}
}

// boots returns the boot times the ready records carry.
func (t *logTap) boots() series {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s series
	for _, e := range t.ready {
		if e.bootMs > 0 {
			s = append(s, time.Duration(e.bootMs*float64(time.Millisecond)))
		}
	}
	return s
}

func (t *logTap) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ready)
}

func (t *logTap) errors() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.errs...)
}

// hits counts the sandboxes among ids that were pool members before a
// create took them (a claimed member keeps its id).
func (t *logTap) hits(ids []string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	members := map[string]bool{}
	for _, e := range t.ready {
		members[e.id] = true
	}
	n := 0
	for _, id := range ids {
		if members[id] {
			n++
		}
	}
	return n
}
