package egress

import (
	"sync"
	"time"
)

// LogSize is how many events a sandbox's log keeps; older ones are
// dropped.
const LogSize = 1000

// MaxLogs is how many sandboxes' logs are kept; past it, the log written
// to least recently goes (an ended sandbox's, in practice).
const MaxLogs = 4096

// Log is the per-sandbox egress log: a bounded ring of events per sandbox,
// newest last. It holds names, addresses and verdicts, never payloads or
// secrets.
type Log struct {
	mu    sync.Mutex // guards rings and observe
	rings map[string]*ring
	// observe hears every event added (Observe).
	observe func(Event)
}

// Observe makes f hear every event added from now on, with no sandbox id:
// what the server's metrics count. f must not block.
func (l *Log) Observe(f func(Event)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.observe = f
}

type ring struct {
	events  []Event
	next    int // where the next event goes once events is full
	touched time.Time
}

// NewLog returns an empty log.
func NewLog() *Log { return &Log{rings: map[string]*ring{}} }

// Add appends e to the log of sandbox id, stamping its time if unset.
func (l *Log) Add(id string, e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.observe != nil {
		l.observe(e)
	}
	r := l.rings[id]
	if r == nil {
		if len(l.rings) >= MaxLogs {
			l.evictLocked()
		}
		r = &ring{}
		l.rings[id] = r
	}
	r.touched = e.Time
	if len(r.events) < LogSize {
		r.events = append(r.events, e)
		return
	}
	r.events[r.next] = e
	r.next = (r.next + 1) % LogSize
}

// Events returns a copy of sandbox id's log, oldest first.
func (l *Log) Events(id string) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rings[id]
	if r == nil {
		return nil
	}
	out := make([]Event, 0, len(r.events))
	out = append(out, r.events[r.next:]...)
	return append(out, r.events[:r.next]...)
}

// Drop forgets sandbox id's log.
func (l *Log) Drop(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.rings, id)
}

// evictLocked drops the log written to least recently.
func (l *Log) evictLocked() {
	var oldest string
	var at time.Time
	for id, r := range l.rings {
		if oldest == "" || r.touched.Before(at) {
			oldest, at = id, r.touched
		}
	}
	delete(l.rings, oldest)
}
