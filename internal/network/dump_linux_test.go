package network

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestCompleteDumpRetriesInterrupted(t *testing.T) {
	calls := 0
	got, err := CompleteDump(func() (int, error) {
		calls++
		if calls < 3 {
			return -1, netlink.ErrDumpInterrupted
		}
		return 7, nil
	})
	if got != 7 || err != nil || calls != 3 {
		t.Fatalf("got %d, %v after %d calls; want 7, nil after 3", got, err, calls)
	}
	// Another error is returned at once.
	calls = 0
	other := errors.New("permission denied")
	if _, err := CompleteDump(func() (int, error) { calls++; return 0, other }); err != other || calls != 1 {
		t.Fatalf("got %v after %d calls, want the error after 1", err, calls)
	}
	// Interrupted for good: bounded, and the error says so.
	calls = 0
	if _, err := CompleteDump(func() (int, error) { calls++; return 0, netlink.ErrDumpInterrupted }); !errors.Is(err, netlink.ErrDumpInterrupted) || calls != dumpTries {
		t.Fatalf("got %v after %d calls, want ErrDumpInterrupted after %d", err, calls, dumpTries)
	}
}
