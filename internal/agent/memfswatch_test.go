package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestMemFSWatchFull(t *testing.T) {
	for _, tt := range []struct {
		name         string
		avail, shmem int
		want         bool
	}{
		{"idle", 400000, 1000, false},
		{"a program holds it (the kernel's OOM killer frees it)", 2000, 10000, false},
		{"file systems hold it and little is left", 2000, 450000, true},
		{"file systems hold much but memory is left", 100000, 450000, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			info := "MemTotal:  500000 kB\nMemFree: 1000 kB\nMemAvailable: " + strconv.Itoa(tt.avail) + " kB\nShmem: " + strconv.Itoa(tt.shmem) + " kB\n"
			os.WriteFile(filepath.Join(dir, "meminfo"), []byte(info), 0o644)
			reason, got := (&MemFSWatch{Proc: dir}).full()
			if got != tt.want {
				t.Fatalf("got %v (%q), want %v", got, reason, tt.want)
			}
			if got && !strings.Contains(reason, "memory file systems hold") {
				t.Errorf("reason %q does not say what holds the memory", reason)
			}
		})
	}
}
