package npm_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// pack runs scripts/npm-pack.sh into a fresh directory and returns it with
// the version of the packages.
func pack(t *testing.T) (dir, version string) {
	t.Helper()
	dir = t.TempDir()
	start := time.Now()
	cmd := exec.Command(filepath.Join(testenv.Root(), "scripts", "npm-pack.sh"), dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm-pack.sh: %v\n%s", err, b)
	}
	t.Logf("npm-pack.sh took %s", time.Since(start).Round(time.Second))
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "sdk", "typescript", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	tgzs, _ := filepath.Glob(filepath.Join(dir, "*.tgz"))
	for _, f := range tgzs {
		if fi, err := os.Stat(f); err == nil {
			t.Logf("%s: %d bytes", filepath.Base(f), fi.Size())
		}
	}
	return dir, pkg.Version
}

// npx runs `npx --no withruntime ARGS` in the project dir (--no: never
// fetch a package, the installed one must answer) and returns stdout,
// stderr and the exit code.
func npx(t *testing.T, proj string, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(hangGuard(t), "npx", append([]string{"--no", "withruntime"}, args...)...)
	cmd.Dir, cmd.Env, cmd.Stdin = proj, env, strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	code := exitCode(t, cmd.Run())
	return out.String(), errb.String(), code
}

// TestInstalledPackageAgainstAServer installs the packed tarballs of the
// package and of this platform's CLI into an empty project (npm reaches no
// other network than its registry, where the other platforms' packages
// are looked up and skipped) and uses `npx withruntime` and the SDK there
// against a real server.
func TestInstalledPackageAgainstAServer(t *testing.T) {
	requireNode(t)
	srv := testenv.StartServer(t)
	out, version := pack(t)

	main := filepath.Join(out, "withruntime-"+version+".tgz")
	platform := filepath.Join(out, fmt.Sprintf("withruntime-cli-linux-%s-%s.tgz", npmArch(), version))
	for _, tgz := range []string{main, platform} {
		// No install script: installs run where scripts are blocked.
		b, err := exec.Command("tar", "-xOzf", tgz, "package/package.json").Output()
		if err != nil {
			t.Fatalf("reading %s: %v", tgz, err)
		}
		var m struct {
			Scripts              map[string]string
			OptionalDependencies map[string]string
		}
		json.Unmarshal(b, &m)
		// Nor prepare: it builds dist/ in a checkout, the tarball ships it.
		for _, s := range []string{"preinstall", "install", "postinstall", "prepare"} {
			if m.Scripts[s] != "" {
				t.Errorf("%s has a %s script: %q", filepath.Base(tgz), s, m.Scripts[s])
			}
		}
		if tgz != main {
			continue
		}
		// One optional dependency per platform, at the package's version.
		want := map[string]string{}
		for _, p := range []string{"linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"} {
			want["@withruntime/cli-"+p] = version
		}
		if !maps.Equal(m.OptionalDependencies, want) {
			t.Errorf("the package's optional dependencies: got %v, want %v", m.OptionalDependencies, want)
		}
	}

	proj := t.TempDir()
	os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"npx-test","private":true,"type":"module"}`), 0o644)
	install := exec.CommandContext(hangGuard(t), "npm", "install", "--no-audit", "--no-fund", main, platform)
	install.Dir = proj
	if b, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install: %v\n%s", err, b)
	}

	cfg := t.TempDir()
	env := append(env(), "WITHRUNTIME_BASE_URL="+srv.URL, "WITHRUNTIME_API_KEY="+srv.Key,
		"XDG_CONFIG_HOME="+filepath.Join(cfg, "config"), "XDG_DATA_HOME="+filepath.Join(cfg, "data"),
		"npm_config_update_notifier=false")

	t.Run("version", func(t *testing.T) {
		stdout, stderr, code := npx(t, proj, env, "", "version")
		if want := "withruntime v" + version + "\n"; code != 0 || stdout != want {
			t.Errorf("got %q (exit %d, stderr %q), want %q", stdout, code, stderr, want)
		}
	})

	t.Run("run prints 42", func(t *testing.T) {
		stdout, stderr, code := npx(t, proj, env, "", "sandbox", "run", "--", "python3", "-c", "print(6 * 7)")
		if code != 0 || stdout != "42\n" {
			t.Errorf("got %q, exit %d, want \"42\\n\", exit 0 (stderr %q)", stdout, code, stderr)
		}
	})

	t.Run("run passes the exit code", func(t *testing.T) {
		_, stderr, code := npx(t, proj, env, "", "sandbox", "run", "--", "sh", "-c", "exit 3")
		if code != 3 {
			t.Errorf("exit code: got %d, want 3 (stderr %q)", code, stderr)
		}
	})

	// Ctrl-C in a terminal signals the whole foreground group: npm, the
	// launcher (to which npm forwards it once more) and, unless it has its
	// own group, the CLI. Here stdin is no terminal, so the CLI has its own
	// group and only the launcher's forwarding reaches it: it must stop its
	// sandbox and exit 130. (Whether a duplicate signal would cut its
	// clean-up short is a race this test cannot see.)
	t.Run("Ctrl-C stops the sandbox", func(t *testing.T) {
		cmd := exec.CommandContext(hangGuard(t), "npx", "--no", "withruntime", "sandbox", "run", "--metadata", "test=ctrl-c",
			"--", "sh", "-c", "echo started; sleep 1000")
		cmd.Dir, cmd.Env = proj, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || sc.Text() != "started" {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("first line: got %q, want started (stderr %q)", sc.Text(), stderr.String())
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		for sc.Scan() {
		}
		cmd.Wait()
		// npm, signaled itself, dies of SIGINT once the launcher has exited
		// 130 (as it does for any command): a shell shows 130 either way.
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !(ws.Signaled() && ws.Signal() == syscall.SIGINT) && ws.ExitStatus() != 130 {
			t.Errorf("npx ended with %v, want exit 130 or death by SIGINT", cmd.ProcessState)
		}
		if got, want := stderr.String(), "error: canceled: interrupt signal received\n"; got != want {
			t.Errorf("stderr: got %q, want %q", got, want)
		}
		ls, lsErr, code := npx(t, proj, env, "", "sandbox", "ls", "--all", "--metadata", "test=ctrl-c", "--json")
		var list struct {
			Sandboxes []struct {
				EndReason string `json:"end_reason"`
			}
		}
		err = json.Unmarshal([]byte(ls), &list)
		if code != 0 || err != nil || len(list.Sandboxes) != 1 || list.Sandboxes[0].EndReason != "stopped" {
			t.Errorf("sandbox ls: got %q (exit %d, stderr %q), want the one sandbox, stopped", ls, code, lsErr)
		}
	})

	t.Run("an error line", func(t *testing.T) {
		_, stderr, code := npx(t, proj, env, "", "sandbox", "get", "sbx0000000000000000")
		if code == 0 || !strings.HasPrefix(stderr, "error: not_found: ") {
			t.Errorf("got exit %d, stderr %q, want a failure and \"error: not_found: ...\"", code, stderr)
		}
	})

	t.Run("secrets set", func(t *testing.T) {
		const value = "sk-npx-test-8d1f0c"
		stdout, stderr, code := npx(t, proj, env, value, "secrets", "set", "NPX_TEST_KEY", "--host", "api.example.com")
		if code != 0 {
			t.Fatalf("exit code: got %d, want 0 (stderr %q)", code, stderr)
		}
		ls, lsErr, code := npx(t, proj, env, "", "secrets", "ls", "--json")
		if code != 0 {
			t.Fatalf("secrets ls: exit %d (stderr %q)", code, lsErr)
		}
		if !strings.Contains(ls, `"NPX_TEST_KEY"`) || !strings.Contains(ls, `"api.example.com"`) {
			t.Errorf("secrets ls --json: got %q, want NPX_TEST_KEY for api.example.com", ls)
		}
		for _, s := range []string{stdout, stderr, ls, lsErr} {
			if strings.Contains(s, value) {
				t.Errorf("the secret's value was printed: %q", s)
			}
		}
	})

	t.Run("ESM import", func(t *testing.T) {
		script := `import { Sandbox } from "withruntime";
const sbx = await Sandbox.create({ metadata: { test: "npm-install" } });
try {
  const run = await sbx.exec(["python3", "-c", "print(6 * 7)"]);
  console.log(JSON.stringify({ id: sbx.id, exitCode: run.exitCode, stdout: run.stdout }));
} finally {
  await sbx.stop();
}
`
		os.WriteFile(filepath.Join(proj, "run.mjs"), []byte(script), 0o644)
		cmd := exec.CommandContext(hangGuard(t), "node", "run.mjs")
		cmd.Dir, cmd.Env = proj, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("node run.mjs: %v\n%s", err, stderr.String())
		}
		var got struct {
			ID       string
			ExitCode int
			Stdout   string
		}
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("output %q: %v", stdout.String(), err)
		}
		if got.ExitCode != 0 || got.Stdout != "42\n" {
			t.Errorf("exec: got exit %d, stdout %q, want 0, \"42\\n\"", got.ExitCode, got.Stdout)
		}
		// The sandbox the script stopped is over on the server.
		info, stderr2, code := npx(t, proj, env, "", "sandbox", "get", "--json", got.ID)
		var sb struct{ State string }
		if err := json.Unmarshal([]byte(info), &sb); code != 0 || err != nil || sb.State != "ended" {
			t.Errorf("sandbox get %s: got %q (exit %d, stderr %q), want state ended", got.ID, info, code, stderr2)
		}
	})
}
