package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const (
	unitDir   = "systemd"
	binPath   = "/usr/local/bin/withruntime"
	apiUnit   = "withruntime-api.service"
	nodeUnit  = "withruntime-node.service"
	envSample = "withruntime.env.example"
)

// unit is a unit file's settings: section -> key -> every value, in order.
type unit map[string]map[string][]string

func readUnit(t *testing.T, name string) unit {
	t.Helper()
	f, err := os.Open(filepath.Join(unitDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section := unit{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, "\\") {
				t.Fatalf("%s: cannot read line %q", name, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// get is the last value of a key, the one systemd uses.
func (u unit) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// readEnv reads the example environment file; commented VAR=VALUE lines
// are the optional settings and count too.
func readEnv(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(unitDir, envSample))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	assign := regexp.MustCompile(`^#?([A-Z_][A-Z0-9_]*)=(.*)$`)
	for _, line := range strings.Split(string(data), "\n") {
		if m := assign.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			env[m[1]] = m[2]
		}
	}
	return env
}

// expand does what systemd does to ExecStart: ${VAR} is one word whatever
// it holds, a word $VAR is the value split at whitespace.
func expand(t *testing.T, words []string, env map[string]string) []string {
	t.Helper()
	var out []string
	for _, w := range words {
		switch {
		case strings.HasPrefix(w, "${") && strings.HasSuffix(w, "}"):
			name := w[2 : len(w)-1]
			v, ok := env[name]
			if !ok {
				t.Errorf("%s is not in %s", name, envSample)
			}
			out = append(out, v)
		case strings.HasPrefix(w, "$"):
			v, ok := env[w[1:]]
			if !ok {
				t.Errorf("%s is not in %s", w[1:], envSample)
			}
			out = append(out, strings.Fields(v)...)
		case strings.Contains(w, "$"):
			t.Errorf("ExecStart word %q: a variable inside a word", w)
		default:
			out = append(out, w)
		}
	}
	return out
}

func execStart(t *testing.T, u unit, env map[string]string) (string, map[string]string) {
	t.Helper()
	words := strings.Fields(u.get("Service", "ExecStart"))
	if len(words) < 2 || words[0] != binPath {
		t.Fatalf("ExecStart %v: want %s and a command", words, binPath)
	}
	return parseArgs(t, expand(t, words[1:], env))
}

func TestEnvironmentExample(t *testing.T) {
	env := readEnv(t)
	url := env["WITHRUNTIME_STORE"]
	if !strings.HasPrefix(url, "postgres://") {
		t.Errorf("WITHRUNTIME_STORE: got %q, want a postgres:// URL", url)
	}
	if userinfo, _, _ := strings.Cut(strings.TrimPrefix(url, "postgres://"), "@"); strings.Contains(userinfo, ":") {
		t.Errorf("WITHRUNTIME_STORE %q has a password: keep it in PGPASSWORD, off the command line", url)
	}
	if env["PGPASSWORD"] == "" {
		t.Error("no PGPASSWORD in the example")
	}
}

func TestAPIUnit(t *testing.T) {
	u, env := readUnit(t, apiUnit), readEnv(t)
	cmd, flags := execStart(t, u, env)
	if cmd != "serve" {
		t.Errorf("ExecStart runs %q, want serve", cmd)
	}
	if flags["--store"] != env["WITHRUNTIME_STORE"] {
		t.Errorf("--store: got %q, want WITHRUNTIME_STORE %q", flags["--store"], env["WITHRUNTIME_STORE"])
	}
	// The data dir must be the one systemd makes writable for the user.
	if want := "/var/lib/" + u.get("Service", "StateDirectory"); flags["--data-dir"] != want {
		t.Errorf("--data-dir: got %q, want the StateDirectory %q", flags["--data-dir"], want)
	}
	// EnvironmentFile: TestAuthorityKeyNotInNodeEnvironment.
	for _, tc := range []struct{ key, want string }{
		{"Restart", "always"},
		{"DynamicUser", "yes"},
		{"NoNewPrivileges", "yes"},
		{"ProtectSystem", "strict"},
		{"PrivateTmp", "yes"},
		{"CapabilityBoundingSet", ""},
	} {
		if got := u.get("Service", tc.key); got != tc.want || len(u["Service"][tc.key]) == 0 {
			t.Errorf("%s: got %q, want %q", tc.key, got, tc.want)
		}
	}
	if u.get("Service", "User") == "root" {
		t.Error("the API server runs as root")
	}
}

func TestNodeUnit(t *testing.T) {
	u, env := readUnit(t, nodeUnit), readEnv(t)
	cmd, flags := execStart(t, u, env)
	if cmd != "node" {
		t.Errorf("ExecStart runs %q, want node", cmd)
	}
	if flags["--store"] != env["WITHRUNTIME_STORE"] {
		t.Errorf("--store: got %q, want WITHRUNTIME_STORE %q", flags["--store"], env["WITHRUNTIME_STORE"])
	}
	if flags["--advertise"] == "" || flags["--shared-checkpoints"] == "" {
		t.Errorf("the example WITHRUNTIME_NODE_ARGS give --advertise %q, --shared-checkpoints %q: want both", flags["--advertise"], flags["--shared-checkpoints"])
	}
	if want := "/var/lib/" + u.get("Service", "StateDirectory"); flags["--data-dir"] != want {
		t.Errorf("--data-dir: got %q, want the StateDirectory %q", flags["--data-dir"], want)
	}
	for _, tc := range []struct{ key, want string }{
		{"EnvironmentFile", "/etc/withruntime/withruntime.env"},
		{"Restart", "always"},
		{"Delegate", "yes"},
		{"KillMode", "process"},
	} {
		if got := u.get("Service", tc.key); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.key, got, tc.want)
		}
	}
	for _, k := range []string{"User", "DynamicUser", "NoNewPrivileges", "PrivateUsers"} {
		if v := u.get("Service", k); v != "" {
			t.Errorf("%s=%s: the node needs root with every capability", k, v)
		}
	}
	if n, err := strconv.Atoi(u.get("Service", "LimitNOFILE")); err != nil || n < 65536 {
		t.Errorf("LimitNOFILE: got %q, want at least 65536", u.get("Service", "LimitNOFILE"))
	}
}

// systemdAnalyze finds the tool; under CI=true its absence fails.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing (Debian's systemd package)")
		}
		t.Skip("systemd-analyze is missing (Debian's systemd package)")
	}
	return path
}

// unitCopies writes the units into a temporary directory with ExecStart's
// binary replaced by a build of the product's, as verify checks that it
// exists; edit may change the text further.
func unitCopies(t *testing.T, edit func(name, text string) string) []string {
	t.Helper()
	self := withruntime(t)
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{apiUnit, nodeUnit} {
		data, err := os.ReadFile(filepath.Join(unitDir, name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if !strings.Contains(text, "ExecStart="+binPath+" ") {
			t.Fatalf("%s: no ExecStart=%s", name, binPath)
		}
		text = strings.ReplaceAll(text, "ExecStart="+binPath+" ", "ExecStart="+self+" ")
		if edit != nil {
			text = edit(name, text)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// verify runs systemd-analyze verify and returns its lines about the
// units (other units of the host it loads may have their own complaints).
func verify(t *testing.T, tool string, paths []string) (lines []string, err error) {
	t.Helper()
	out, err := exec.Command(tool, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, apiUnit) || strings.Contains(line, nodeUnit) {
			lines = append(lines, line)
		} else if strings.TrimSpace(line) != "" {
			t.Logf("systemd-analyze, not about the units: %s", line)
		}
	}
	return lines, err
}

func TestSystemdAnalyzeVerify(t *testing.T) {
	tool := systemdAnalyze(t)
	lines, err := verify(t, tool, unitCopies(t, nil))
	if err != nil {
		t.Errorf("systemd-analyze verify: %v", err)
	}
	for _, l := range lines {
		t.Errorf("systemd-analyze verify: %s", l)
	}

	// The check sees a mistake: a misspelt key is only a warning to
	// systemd (exit 0), so the warning lines are what must fail.
	lines, _ = verify(t, tool, unitCopies(t, func(name, text string) string {
		return strings.Replace(text, "Restart=always", "Restrat=always", 1)
	}))
	if len(lines) != 2 {
		t.Errorf("verify of units with Restrat=: got %q, want a warning about each unit", lines)
	}
}

func TestAPIUnitExposure(t *testing.T) {
	tool := systemdAnalyze(t)
	out, err := exec.Command(tool, "security", "--offline=yes", unitCopies(t, nil)[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for ` + regexp.QuoteMeta(apiUnit) + `: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	level, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	// systemd rates 0-10; below 2 is its "OK". The API server needs no
	// privilege, so its sandboxing must stay there.
	if level >= 2 {
		t.Errorf("exposure of %s: got %.1f, want below 2\n%s", apiUnit, level, out)
	}
}
