package main

import (
	"log/slog"
	"testing"
	"time"
)

// The tap reads what the server's JSON logger writes: ready records with
// their boot time and sandbox, nothing else.
func TestLogTapReadsPoolReady(t *testing.T) {
	tap := newLogTap()
	log := slog.New(slog.NewJSONHandler(tap, nil))
	start := time.Now().Add(-time.Second)
	log.Info("serving", "url", "http://127.0.0.1:1")
	log.Info(poolReady, "sandbox", "sb-a", "size", "2x4096", "boot_ms", 120)
	log.Info(poolReady, "sandbox", "sb-b", "size", "2x4096", "boot_ms", 80)
	log.Debug(poolReady, "sandbox", "sb-debug") // below the handler's level

	if got := tap.total(); got != 2 {
		t.Fatalf("got %d ready records, want 2", got)
	}
	if at, ok := tap.waitReady(start, 2, time.Second); !ok || at.IsZero() {
		t.Errorf("waitReady(2): got %v %v, want the second record's time", at, ok)
	}
	if _, ok := tap.waitReady(start, 3, 50*time.Millisecond); ok {
		t.Error("waitReady(3) with two records: got ok, want a timeout")
	}
	if got := tap.hits([]string{"sb-a", "sb-cold", "sb-b"}); got != 2 {
		t.Errorf("hits: got %d, want 2", got)
	}
	if got, want := tap.boots().pct(0.5), 120*time.Millisecond; got != want {
		t.Errorf("boot median: got %v, want %v", got, want)
	}
}

// A record logged while a wait is on wakes it.
func TestLogTapWakesWaiter(t *testing.T) {
	tap := newLogTap()
	log := slog.New(slog.NewJSONHandler(tap, nil))
	since := time.Now().Add(-time.Second)
	go func() {
		time.Sleep(20 * time.Millisecond)
		log.Info(poolReady, "sandbox", "sb-late", "boot_ms", 1)
	}()
	if _, ok := tap.waitReady(since, 1, 10*time.Second); !ok {
		t.Fatal("waitReady: got a timeout, want the late record")
	}
}
