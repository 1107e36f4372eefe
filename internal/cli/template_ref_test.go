package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIsImageRef(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "app:v1")
	os.WriteFile(file, nil, 0o644)
	t.Chdir(dir)
	for arg, want := range map[string]bool{
		"registry.example.test/team/app:v1": true,
		"localhost:5000/app":                true,
		"team/app@sha256:00":                true,
		"app:v1":                            false, // a file of that name is here
		"-":                                 false,
		"app.tar":                           false,
		"images/app.tar":                    false,
		"/tmp/x/app":                        false,
		"./app:v1":                          false,
		"plain":                             false,
	} {
		if got := isImageRef(arg); got != want {
			t.Errorf("isImageRef(%q) = %v, want %v", arg, got, want)
		}
	}
}
