package server

import (
	"log/slog"
	"syscall"
	"testing"
)

// With a low descriptor limit, the API's and E2B's listeners share half
// of it.
func TestListenLimitSharesTheDescriptors(t *testing.T) {
	var saved syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
		t.Skip("no open files limit here:", err)
	}
	low := saved
	low.Cur = 1000
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved) })
	for _, tc := range []struct {
		e2b  string
		max  int
		want int
	}{
		{"", 0, 500},
		{"127.0.0.1:0", 0, 250},
		{"127.0.0.1:0", 100, 100},
	} {
		got, err := listenLimit(Config{MaxConns: tc.max, E2BListen: tc.e2b, Logger: slog.New(slog.DiscardHandler)})
		if err != nil || got != tc.want {
			t.Errorf("E2B on %q, --max-conns %d: got %d (%v), want %d per listener", tc.e2b, tc.max, got, err, tc.want)
		}
	}
	if _, err := listenLimit(Config{MaxConns: -1}); err == nil {
		t.Error("--max-conns -1: got no error, want one")
	}
}
