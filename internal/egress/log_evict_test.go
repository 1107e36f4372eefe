package egress

import (
	"strconv"
	"testing"
	"time"
)

func TestLogKeepsAtMostMaxLogs(t *testing.T) {
	l := NewLog()
	start := time.Now()
	for i := 0; i <= MaxLogs; i++ {
		l.Add("sbx"+strconv.Itoa(i), Event{Time: start.Add(time.Duration(i) * time.Millisecond), Verdict: Allowed})
	}
	if got := len(l.Events("sbx0")); got != 0 {
		t.Fatalf("the least recently written log: got %d events, want it evicted", got)
	}
	if got := len(l.Events("sbx1")); got != 1 {
		t.Fatalf("a newer log: got %d events, want 1", got)
	}
	if got := len(l.Events("sbx" + strconv.Itoa(MaxLogs))); got != 1 {
		t.Fatalf("the newest log: got %d events, want 1", got)
	}
}
