package client

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLocalKey(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	t.Setenv(EnvBaseURL, "")
	t.Setenv(EnvAPIKey, "")
	if err := os.MkdirAll(filepath.Join(data, "withruntime"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "withruntime", "admin.key"), []byte("wr_local\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts []Option
		env  string // WITHRUNTIME_API_KEY
		want string
	}{
		{"default address", nil, "", "wr_local"},
		{"default address with a slash", []Option{WithBaseURL(DefaultBaseURL + "/")}, "", "wr_local"},
		{"another address", []Option{WithBaseURL("http://127.0.0.1:9")}, "", ""},
		{"the environment's key wins", nil, "wr_env", "wr_env"},
		{"WithAPIKey wins", []Option{WithAPIKey("wr_opt")}, "", "wr_opt"},
		{"WithAPIKey empty: no key", []Option{WithAPIKey("")}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvAPIKey, tt.env)
			c, err := New(tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if c.apiKey != tt.want {
				t.Errorf("key: got %q, want %q", c.apiKey, tt.want)
			}
		})
	}

	t.Setenv("XDG_DATA_HOME", t.TempDir()) // no key file
	if got := LocalKey(DefaultBaseURL); got != "" {
		t.Errorf("no key file: got %q, want none", got)
	}
}

func TestLocalDataDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"", "relative"} {
		t.Setenv("XDG_DATA_HOME", v)
		got, err := LocalDataDir()
		if want := filepath.Join(home, ".local", "share", "withruntime"); err != nil || got != want {
			t.Errorf("XDG_DATA_HOME=%q: got %q (%v), want %q", v, got, err, want)
		}
	}
	t.Setenv("XDG_DATA_HOME", "/d")
	if got, _ := LocalDataDir(); got != "/d/withruntime" {
		t.Errorf("XDG_DATA_HOME=/d: got %q", got)
	}
}
