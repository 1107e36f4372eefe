package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The client's configuration file, $XDG_CONFIG_HOME/withruntime/config.json
// (default ~/.config/withruntime/config.json). It holds the trial keys this
// machine obtained, one per server:
//
//	{"trial_keys": {"https://runtime.example.org": "wr_..."}}
//
// Other entries are kept as they are when it is rewritten. The directory is
// made 0700 and the file written 0600, atomically (a temporary file renamed
// over it), since it holds secrets.

const (
	envConfigHome  = "XDG_CONFIG_HOME"
	configDirName  = "withruntime"
	configFileName = "config.json"
)

// configPath returns the path of the configuration file.
func configPath() (string, error) {
	base := os.Getenv(envConfigHome)
	if !filepath.IsAbs(base) { // the XDG spec says to ignore a relative path
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the configuration directory: %v (set %s)", err, envConfigHome)
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, configDirName, configFileName), nil
}

// readConfig returns the configuration file's top-level entries and its
// trial keys; a missing file is an empty configuration.
func readConfig(path string) (map[string]json.RawMessage, map[string]string, error) {
	entries := map[string]json.RawMessage{}
	keys := map[string]string{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return entries, keys, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	if entries == nil { // the file says null
		entries = map[string]json.RawMessage{}
	}
	if raw, ok := entries["trial_keys"]; ok {
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, nil, fmt.Errorf("%s: trial_keys: %v", path, err)
		}
		if keys == nil {
			keys = map[string]string{}
		}
	}
	return entries, keys, nil
}

// storedTrialKey returns the trial key stored for baseURL, or "".
func storedTrialKey(path, baseURL string) (string, error) {
	_, keys, err := readConfig(path)
	if err != nil {
		return "", err
	}
	return keys[baseURL], nil
}

// storeTrialKey sets (or, with key "", removes) the trial key of baseURL,
// keeping every other entry of the file.
func storeTrialKey(path, baseURL, key string) error {
	entries, keys, err := readConfig(path)
	if err != nil {
		return err
	}
	if key == "" {
		delete(keys, baseURL)
	} else {
		keys[baseURL] = key
	}
	raw, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	entries["trial_keys"] = raw
	b, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// writeFileAtomic writes b to path with mode 0600 through a temporary file
// in the same directory, which it makes (0700) when missing.
func writeFileAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil { // it may predate us, more open
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp") // mode 0600
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
