package agent

import "testing"

// TestTailFromAheadOfOutput: an offset past what was written skips those
// bytes once they come, instead of falling back to the end of the stream
// (a reader that attached early would otherwise read what it asked to
// skip).
func TestTailFromAheadOfOutput(t *testing.T) {
	tl := newTail(64)
	tl.write([]byte("ab"))
	b, next := tl.from(5, 1024)
	if len(b) != 0 || next != 5 {
		t.Fatalf("got %q, next %d before offset 5 was written, want nothing and 5", b, next)
	}
	tl.write([]byte("cdefgh"))
	b, next = tl.from(next, 1024)
	if string(b) != "fgh" || next != 8 {
		t.Errorf("got %q, next %d, want %q and 8", b, next, "fgh")
	}
}
