package setup

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPinnedGvisor(t *testing.T) {
	tests := []struct {
		name, gomod, want string
		wantErr           bool
	}{
		{"require block", "module x\n\nrequire (\n\tgvisor.dev/gvisor v0.0.0-2026 // indirect\n)\n", "v0.0.0-2026", false},
		{"single line", "module x\nrequire gvisor.dev/gvisor v1.2.3\n", "v1.2.3", false},
		{"absent", "module x\n", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "go.mod"), []byte(tt.gomod), 0o644)
			got, err := pinnedGvisor(dir)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestProjectPinsGvisor(t *testing.T) {
	got, err := pinnedGvisor("../..")
	if err != nil || got == "" {
		t.Fatalf("the project's go.mod: got %q, %v; want a pinned version", got, err)
	}
}
