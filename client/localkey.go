package client

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The local daemon (the server the CLI starts on DefaultBaseURL when
// nothing answers there) keeps its admin key in its data dir. A client of
// that address with no key set reads it from there when it can (the
// file's mode, 0600, keeps other users out) and sends it only over
// connections to a socket that the key file's owner listens on, as the
// kernel reports it (see WithListenerOwner): while no daemon runs, any
// local user can listen on the default address.

// maxLocalKey bounds what is read of admin.key.
const maxLocalKey = 4096

// localBaseURL is the address the local key is sent to: DefaultBaseURL
// (tests point it elsewhere).
var localBaseURL = DefaultBaseURL

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
// DefaultBaseURL and the key file is readable, and "" otherwise. It does
// not check who listens there: New does, before it sends the key.
func LocalKey(baseURL string) string {
	if strings.TrimRight(baseURL, "/") != localBaseURL {
		return ""
	}
	key, _, err := ReadLocalKey()
	if err != nil {
		return ""
	}
	return key
}

// ReadLocalKey reads the local daemon's admin key and returns it with the
// uid of the key file's owner (the user whose daemon it is). The file is
// opened without following a symbolic link and must be a regular file.
func ReadLocalKey() (key string, owner int, err error) {
	path, err := LocalKeyPath()
	if err != nil {
		return "", 0, err
	}
	f, err := openNoFollow(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s: not a regular file", path)
	}
	owner, err = fileOwner(fi)
	if err != nil {
		return "", 0, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxLocalKey))
	if err != nil {
		return "", 0, err
	}
	return strings.TrimSpace(string(b)), owner, nil
}
