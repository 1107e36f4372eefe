package egress

import (
	"fmt"
	"testing"
)

func TestLog(t *testing.T) {
	l := NewLog()
	for i := range LogSize + 10 {
		l.Add("a", Event{Kind: "tcp", Name: fmt.Sprint(i), Verdict: Allowed})
	}
	l.Add("b", Event{Kind: "dns", Verdict: Refused})
	evs := l.Events("a")
	if len(evs) != LogSize || evs[0].Name != "10" || evs[len(evs)-1].Name != fmt.Sprint(LogSize+9) {
		t.Errorf("got %d events from %q to %q, want %d from 10, newest last", len(evs), evs[0].Name, evs[len(evs)-1].Name, LogSize)
	}
	if evs[0].Time.IsZero() {
		t.Error("event time not stamped")
	}
	if got := l.Events("b"); len(got) != 1 {
		t.Errorf("b: got %d events, want 1", len(got))
	}
	l.Drop("a")
	if got := l.Events("a"); len(got) != 0 {
		t.Errorf("after Drop: got %d events", len(got))
	}
}
