package microvm

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestCopyBounded(t *testing.T) {
	var out bytes.Buffer
	if err := copyBounded(&out, strings.NewReader("12345"), 5); err != nil || out.String() != "12345" {
		t.Fatalf("at the limit: got %q %v, want all of it", out.String(), err)
	}
	out.Reset()
	err := copyBounded(&out, strings.NewReader("123456"), 5)
	if !errors.Is(err, errCheckpointTooLarge) {
		t.Fatalf("past the limit: got %v, want errCheckpointTooLarge", err)
	}
	if out.Len() > 6 {
		t.Fatalf("past the limit: wrote %d bytes", out.Len())
	}
	// A machine of 512 MiB fits (its pages and headers), one of twice the
	// memory does not.
	if l := checkpointLimit(512); l < 512<<20 || l >= 1024<<20 {
		t.Fatalf("limit for 512 MiB: %d", l)
	}
}
