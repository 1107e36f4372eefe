package main

import (
	"os"
	"path/filepath"
	"testing"
)

// diskUsage counts a file's blocks once however many hard links it has,
// as du does: the templates mode's disk figure must not count a layer's
// shared files twice.
func TestDiskUsageCountsHardLinksOnce(t *testing.T) {
	dir := t.TempDir()
	empty, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	one, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if one-empty < 1<<20 {
		t.Fatalf("a 1 MiB file adds %d bytes, want at least 1 MiB", one-empty)
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	linked, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if linked != one {
		t.Fatalf("a hard link changed the usage from %d to %d bytes", one, linked)
	}
	if err := os.WriteFile(filepath.Join(dir, "c"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	two, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if two-one < 1<<20 {
		t.Fatalf("a second 1 MiB file adds %d bytes, want at least 1 MiB", two-one)
	}
}
