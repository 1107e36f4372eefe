package agent

import (
	"sync"
	"unicode/utf8"
)

// tail keeps the last max bytes written to it.
type tail struct {
	max int

	mu    sync.Mutex // guards buf and total
	buf   []byte     // holds up to 2*max bytes; the last max count
	total int64
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) write(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(b))
	if len(b) >= t.max {
		t.buf = append(t.buf[:0], b[len(b)-t.max:]...)
		return
	}
	t.buf = append(t.buf, b...)
	if len(t.buf) > 2*t.max {
		// Trimming only now and then keeps writes amortized O(len(b)).
		t.buf = t.buf[:copy(t.buf, t.buf[len(t.buf)-t.max:])]
	}
}

// snapshot returns the kept output and whether older output was dropped.
func (t *tail) snapshot() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	truncated := t.total > int64(len(b))
	if truncated {
		// Do not start in the middle of a UTF-8 sequence.
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return string(b), truncated
}

// from returns up to max kept bytes from absolute offset off (counted
// from the stream's first byte) and the offset after them. Bytes before
// the oldest kept one are gone: reading starts there instead; an offset
// not written yet stays as it is, so those bytes are skipped. A cut at max
// does not split a UTF-8 sequence when it can help it.
func (t *tail) from(off int64, max int) ([]byte, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The kept bytes are the last max of buf, as snapshot has them: buf
	// may hold more until its next trim.
	kept := t.buf
	if len(kept) > t.max {
		kept = kept[len(kept)-t.max:]
	}
	first := t.total - int64(len(kept))
	if off < first {
		off = first
	}
	if off >= t.total {
		// An offset past what was written so far waits for the bytes up to
		// it: they are skipped when they come, as the reader asked.
		return nil, off
	}
	b := kept[off-first:]
	if len(b) > max {
		b = b[:max]
		if cut := completeUTF8(b); cut > 0 {
			b = b[:cut]
		}
	}
	return append([]byte(nil), b...), off + int64(len(b))
}

// bell wakes everyone waiting on it at its next ring.
type bell struct {
	mu sync.Mutex // guards ch
	ch chan struct{}
}

// ring wakes the current waiters.
func (b *bell) ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// wait returns a channel closed at the next ring. Take it before looking
// at what the ring announces, so that no ring goes unseen.
func (b *bell) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}
