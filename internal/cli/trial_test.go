package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// useTrialServer points the CLI at url without a key, with a configuration
// directory of its own, and returns the configuration file's path.
func useTrialServer(t *testing.T, url string) string {
	t.Helper()
	t.Setenv(client.EnvBaseURL, url)
	t.Setenv(client.EnvAPIKey, "")
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // no local daemon's admin key
	return filepath.Join(dir, "withruntime", "config.json")
}

// readTrialKeys returns the trial keys of the configuration file.
func readTrialKeys(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		TrialKeys map[string]string `json:"trial_keys"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("config %q: %v", b, err)
	}
	return cfg.TrialKeys
}

func (f *fakeServer) trialCalls() (n int, auth []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.trialAuth), append([]string(nil), f.trialAuth...)
}

func TestTrialKeyObtainedStoredAndReused(t *testing.T) {
	f := newFakeServer(t)
	path := useTrialServer(t, f.URL)

	code, stdout, stderr := run(t, nil, "sandbox", "run", "--trial", "--", "true")
	if code != 0 || stderr != "" {
		t.Fatalf("first run: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	n, auth := f.trialCalls()
	if n != 1 || auth[0] != "" {
		t.Fatalf("trial requests: got %d with Authorization %q, want 1 without", n, auth)
	}
	if got := f.auth(); got[len(got)-1] != "Bearer wr_trial_1" {
		t.Errorf("run used %q, want the trial key", got[len(got)-1])
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode: got %v, want 0600", fi.Mode().Perm())
	}
	if di, err := os.Stat(filepath.Dir(path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("config directory: %v, mode %v, want 0700", err, di.Mode().Perm())
	}
	if got, want := readTrialKeys(t, path), map[string]string{f.URL: "wr_trial_1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("trial keys: got %v, want %v", got, want)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	before := len(f.auth())
	code, _, stderr = run(t, nil, "sandbox", "run", "--trial", "--", "true")
	if code != 0 {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	}
	if n, _ := f.trialCalls(); n != 1 {
		t.Errorf("second run asked for a trial key again (%d requests)", n)
	}
	for _, a := range f.auth()[before:] {
		if a != "Bearer wr_trial_1" {
			t.Errorf("second run sent %q, want the stored trial key", a)
		}
	}

	// create --trial reuses it too, and the other sandbox commands use it
	// with --trial.
	if code, stdout, stderr := run(t, nil, "sandbox", "create", "--trial"); code != 0 || stdout != "sbx_new\n" {
		t.Errorf("create --trial: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	before = len(f.auth())
	if code, _, stderr := run(t, nil, "sandbox", "ls", "--trial"); code != 0 {
		t.Errorf("ls --trial: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run(t, nil, "sandbox", "exec", "--trial", "sbx_new", "--", "true"); code != 0 {
		t.Errorf("exec --trial: exit %d: %s", code, stderr)
	}
	for _, a := range f.auth()[before:] {
		if a != "Bearer wr_trial_1" {
			t.Errorf("ls/exec --trial sent %q, want the stored trial key", a)
		}
	}
	if n, _ := f.trialCalls(); n != 1 {
		t.Errorf("trial requests: got %d, want 1", n)
	}
}

func TestTrialKeepsOtherConfiguration(t *testing.T) {
	f := newFakeServer(t)
	path := useTrialServer(t, f.URL)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	old := `{"theme": {"color": "blue"}, "trial_keys": {"https://other.example.org": "wr_other"}}`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, nil, "sandbox", "run", "--trial", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := map[string]string{"https://other.example.org": "wr_other", f.URL: "wr_trial_1"}
	if got := readTrialKeys(t, path); !reflect.DeepEqual(got, want) {
		t.Errorf("trial keys: got %v, want %v", got, want)
	}
	b, _ := os.ReadFile(path)
	var all map[string]any
	json.Unmarshal(b, &all)
	if !reflect.DeepEqual(all["theme"], map[string]any{"color": "blue"}) {
		t.Errorf("other entries lost: %s", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode: got %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("config directory mode: got %v, want 0700", di.Mode().Perm())
	}
}

func TestTrialExplicitKeyWins(t *testing.T) {
	f := newFakeServer(t)
	path := useTrialServer(t, f.URL)
	t.Setenv(client.EnvAPIKey, testKey)
	if code, _, stderr := run(t, nil, "sandbox", "run", "--trial", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n, _ := f.trialCalls(); n != 0 {
		t.Errorf("asked for a trial key although %s is set", client.EnvAPIKey)
	}
	for _, a := range f.auth() {
		if a != "Bearer "+testKey {
			t.Errorf("sent %q, want the key of %s", a, client.EnvAPIKey)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("config file written: %v", err)
	}
}

func TestTrialRefused(t *testing.T) {
	tests := []struct {
		name string
		err  api.ErrorDetail
	}{
		{"no trials", api.ErrorDetail{Code: "forbidden", Message: "this server offers no trial accounts"}},
		{"rate limited", api.ErrorDetail{Code: "rate_limited", Message: "too many trial accounts from this address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			path := useTrialServer(t, f.URL)
			f.trialErr = &tt.err
			code, stdout, stderr := run(t, nil, "sandbox", "run", "--trial", "--", "true")
			want := "error: " + tt.err.Code + ": obtaining a trial key from " + f.URL + ": " + tt.err.Message + "\n"
			if code != 125 || stdout != "" || stderr != want {
				t.Errorf("run: got exit %d stdout %q stderr %q, want 125 and %q", code, stdout, stderr, want)
			}
			code, _, stderr = run(t, nil, "sandbox", "create", "--trial")
			if code != 1 || stderr != want {
				t.Errorf("create: got exit %d stderr %q, want 1 and %q", code, stderr, want)
			}
			if created, _, _ := f.snapshot(); len(created) != 0 {
				t.Errorf("a refused trial created %d sandboxes", len(created))
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("config file written: %v", err)
			}
		})
	}
}

func TestTrialKeyUsedWithoutFlag(t *testing.T) {
	f := newFakeServer(t)
	path := useTrialServer(t, f.URL)
	if err := storeTrialKey(path, f.URL, "wr_stored"); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, nil, "sandbox", "ls"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := f.auth(); len(got) == 0 || got[len(got)-1] != "Bearer wr_stored" {
		t.Errorf("authorization: got %q, want the stored trial key", got)
	}
	t.Setenv(client.EnvAPIKey, "wr_explicit")
	if code, _, stderr := run(t, nil, "sandbox", "ls"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := f.auth(); got[len(got)-1] != "Bearer wr_explicit" {
		t.Errorf("authorization: got %q, want WITHRUNTIME_API_KEY", got)
	}
}

func TestTrialOnDefaultAddress(t *testing.T) {
	f := newFakeServer(t)
	path := useTrialServer(t, "")
	app := &App{defaultBaseURL: f.URL}
	if code, _, stderr := run(t, app, "sandbox", "run", "--trial", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := readTrialKeys(t, path); got[f.URL] != "wr_trial_1" {
		t.Errorf("trial keys: got %v", got)
	}
}

func TestTrialStoredKeyRefused(t *testing.T) {
	f := newFakeServer(t)
	path := useTrialServer(t, f.URL)
	if err := storeTrialKey(path, f.URL, "wr_stale"); err != nil {
		t.Fatal(err)
	}
	if err := storeTrialKey(path, "https://other.example.org", "wr_other"); err != nil {
		t.Fatal(err)
	}
	f.createErr = &api.ErrorDetail{Code: "unauthorized", Message: "unknown key"}
	code, _, stderr := run(t, nil, "sandbox", "run", "--trial", "--", "true")
	if code != 125 || !strings.HasPrefix(stderr, "error: unauthorized: unknown key (the trial key stored for") {
		t.Errorf("got exit %d stderr %q", code, stderr)
	}
	if got, want := readTrialKeys(t, path), map[string]string{"https://other.example.org": "wr_other"}; !reflect.DeepEqual(got, want) {
		t.Errorf("trial keys: got %v, want %v (the refused one forgotten)", got, want)
	}
	f.createErr = nil
	if code, _, stderr := run(t, nil, "sandbox", "run", "--trial", "--", "true"); code != 0 {
		t.Fatalf("run after forgetting: exit %d: %s", code, stderr)
	}
	if got := readTrialKeys(t, path); got[f.URL] != "wr_trial_1" {
		t.Errorf("trial keys: got %v, want a new one for %s", got, f.URL)
	}
}

func TestTrialWithoutStoredKey(t *testing.T) {
	f := newFakeServer(t)
	useTrialServer(t, f.URL)
	code, _, stderr := run(t, nil, "sandbox", "ls", "--trial")
	if code != 1 || !strings.HasPrefix(stderr, "error: unauthorized: WITHRUNTIME_API_KEY is unset and no trial key is stored for "+f.URL) {
		t.Errorf("ls: got exit %d stderr %q", code, stderr)
	}
	if code, _, _ := run(t, nil, "sandbox", "exec", "--trial", "sbx_a", "--", "true"); code != 125 {
		t.Errorf("exec: got exit %d, want 125", code)
	}
	if n, _ := f.trialCalls(); n != 0 {
		t.Errorf("ls or exec asked for a trial key")
	}
}

func TestTrialBadConfigIsNotOverwritten(t *testing.T) {
	f := newFakeServer(t)
	path := useTrialServer(t, f.URL)
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.WriteFile(path, []byte("{not json"), 0o600)
	code, _, stderr := run(t, nil, "sandbox", "run", "--trial", "--", "true")
	if code != 125 || !strings.Contains(stderr, "reading the client configuration: "+path) {
		t.Errorf("got exit %d stderr %q", code, stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != "{not json" {
		t.Errorf("config overwritten: %q", b)
	}
	if n, _ := f.trialCalls(); n != 0 {
		t.Errorf("asked for a trial key with an unreadable configuration")
	}
}

func TestConfigPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/cfg")
	if p, _ := configPath(); p != "/cfg/withruntime/config.json" {
		t.Errorf("got %q", p)
	}
	t.Setenv("XDG_CONFIG_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	if p, _ := configPath(); p != "/home/u/.config/withruntime/config.json" {
		t.Errorf("relative XDG_CONFIG_HOME: got %q", p)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	if p, _ := configPath(); p != "/home/u/.config/withruntime/config.json" {
		t.Errorf("unset XDG_CONFIG_HOME: got %q", p)
	}
}
