package client

import (
	"os"
	"path/filepath"
	"strings"
)

// The local daemon (the server the CLI starts on DefaultBaseURL when
// nothing answers there) keeps its admin key in its data dir. A client of
// that address with no key set reads it from there when it can: the
// machine's owner is the daemon's only user, and the file's mode (0600)
// keeps everybody else out.

// LocalDataDir returns the local daemon's data dir,
// $XDG_DATA_HOME/withruntime (XDG_DATA_HOME defaulting to ~/.local/share;
// a relative one is ignored, as the XDG spec says).
func LocalDataDir() (string, error) {
	base := os.Getenv("XDG_DATA_HOME")
	if !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "withruntime"), nil
}

// LocalKeyPath returns where the local daemon keeps its admin key.
func LocalKeyPath() (string, error) {
	dir, err := LocalDataDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "admin.key"), nil
}

// LocalKey returns the local daemon's admin key when baseURL is
// DefaultBaseURL and the key file is readable, and "" otherwise.
func LocalKey(baseURL string) string {
	if strings.TrimRight(baseURL, "/") != DefaultBaseURL {
		return ""
	}
	path, err := LocalKeyPath()
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
