// Package install_test installs the SDKs as a user does, from a real
// server: scripts/sdk-build.sh builds the packages the server serves at
// /sdk/, `withruntime sdk python|typescript` prints the install command for
// that server, and the test runs exactly that command in a fresh virtual
// environment or npm project, with nothing of the checkout on its paths,
// then uses the installed SDK against the server.
package install_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sdkdist"
	"github.com/withruntime/withruntime/internal/testenv"
)

// requireTools skips (fails under CI, which has them) without the tools a
// user installs with.
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI must have %s: %v", tool, err)
			}
			t.Skipf("needs %s: %v", tool, err)
		}
	}
}

// userEnv is this process's environment without what would let the
// checkout's packages in (or point the SDKs elsewhere), plus extra.
func userEnv(extra ...string) []string {
	var e []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "WITHRUNTIME_"), strings.HasPrefix(name, "npm_"),
			name == "PYTHONPATH", name == "PYTHONHOME", name == "VIRTUAL_ENV", name == "NODE_PATH",
			name == "PIP_REQUIRE_VIRTUALENV":
			continue
		}
		e = append(e, kv)
	}
	return append(e, extra...)
}

// sh runs a command line as a user types it, in dir, and returns its
// stdout; it fails the test on a non-zero exit.
func sh(t *testing.T, dir string, env []string, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", line, err, out.String(), errb.String())
	}
	return out.String()
}

// printed runs the CLI's `sdk` command against the server and returns the
// one line it prints.
func printed(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.CLI(t), append([]string{"sdk"}, args...)...)
	cmd.Env = env
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("withruntime sdk %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	line := strings.TrimSuffix(string(out), "\n")
	if line == "" || strings.Contains(line, "\n") {
		t.Fatalf("withruntime sdk %s printed %q, want one line", strings.Join(args, " "), out)
	}
	return line
}

// readmeJS is the first ```js block of the TypeScript SDK's README: its
// example as a user copies it into a .mjs file.
func readmeJS(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "sdk", "typescript", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n```js\n")
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("the TypeScript README has no ```js block")
	}
	return block + "\n"
}

// TestInstallFromTheServer: one server, set up as scripts/up.sh does
// (its packages built by scripts/sdk-build.sh), and each SDK installed
// from it by the command `withruntime sdk` prints.
func TestInstallFromTheServer(t *testing.T) {
	testenv.RequiresGvisor(t)
	requireTools(t, "python3", "node", "npm", "npx")
	platform := sdkdist.NPMPlatform(runtime.GOOS, runtime.GOARCH)
	if platform == "" {
		t.Skipf("no CLI package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}

	sdkDir := t.TempDir()
	start := time.Now()
	build := exec.Command(filepath.Join(testenv.Root(), "scripts", "sdk-build.sh"), sdkDir)
	// This platform's CLI package only: the others take minutes to build
	// and this machine cannot run them.
	build.Env = append(os.Environ(), "NPM_PACK_PLATFORMS="+platform)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("sdk-build.sh: %v\n%s", err, b)
	}
	t.Logf("sdk-build.sh took %s", time.Since(start).Round(time.Second))

	srv := testenv.StartServer(t, "--sdk-dir", sdkDir)
	home := t.TempDir()
	env := userEnv("WITHRUNTIME_BASE_URL="+srv.URL, "WITHRUNTIME_API_KEY="+srv.Key,
		"HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_DATA_HOME="+filepath.Join(home, "data"),
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"), "PYTHONNOUSERSITE=1", "PIP_DISABLE_PIP_VERSION_CHECK=1",
		"npm_config_cache="+filepath.Join(home, "npm-cache"), "npm_config_update_notifier=false",
		"npm_config_audit=false", "npm_config_fund=false")

	t.Run("python", func(t *testing.T) {
		line := printed(t, env, "python")
		want := "pip install 'withruntime-sdk @ " + srv.URL + "/sdk/python/withruntime_sdk-"
		if !strings.HasPrefix(line, want) || !strings.HasSuffix(line, "-py3-none-any.whl'") {
			t.Fatalf("withruntime sdk python printed %q, want %s...-py3-none-any.whl'", line, want)
		}
		dir := t.TempDir()
		venv := filepath.Join(dir, "venv")
		sh(t, dir, env, "python3 -m venv "+venv)
		// The virtual environment's pip is the pip of the printed command,
		// as for a user who activated it.
		venvEnv := slices.Concat(env, []string{"PATH=" + filepath.Join(venv, "bin") + ":" + os.Getenv("PATH"), "VIRTUAL_ENV=" + venv})
		sh(t, dir, venvEnv, line)

		script := `
import json, withruntime
from withruntime import Sandbox
sbx = Sandbox.create(base_url=BASE, api_key=KEY, metadata={"test": "install-python"})
try:
    run = sbx.exec("echo hi", check=True)
finally:
    sbx.stop()
print(json.dumps({"file": withruntime.__file__, "stdout": run.stdout, "state": sbx.info().state}))
`
		script = strings.NewReplacer("BASE", pyString(srv.URL), "KEY", pyString(srv.Key)).Replace(script)
		os.WriteFile(filepath.Join(dir, "use.py"), []byte(script), 0o644)
		out := sh(t, dir, venvEnv, "python use.py")
		var got struct{ File, Stdout, State string }
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("use.py printed %q: %v", out, err)
		}
		if !strings.HasPrefix(got.File, venv+string(filepath.Separator)) {
			t.Errorf("withruntime was imported from %s, not from the virtual environment %s", got.File, venv)
		}
		if got.Stdout != "hi\n" || got.State != "ended" {
			t.Errorf("exec: stdout %q, state after stop %q, want \"hi\\n\", ended", got.Stdout, got.State)
		}
		// The distribution is the one the command named, and the name a
		// user would look for on the package index.
		if out := sh(t, dir, venvEnv, "pip show withruntime-sdk"); !strings.Contains(out, "Name: withruntime-sdk\n") {
			t.Errorf("pip show withruntime-sdk: %q", out)
		}
	})

	t.Run("typescript", func(t *testing.T) {
		line := printed(t, env, "typescript")
		if want := "npm install " + srv.URL + "/sdk/npm/withruntime.tgz"; line != want {
			t.Fatalf("withruntime sdk typescript printed %q, want %q", line, want)
		}
		proj := t.TempDir()
		os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"install-test","private":true,"type":"module"}`), 0o644)
		sh(t, proj, env, line)
		if _, err := os.Stat(filepath.Join(proj, "node_modules", "withruntime", "dist", "index.js")); err != nil {
			t.Errorf("the installed package has no dist/: %v", err)
		}
		// The README's example as written, on this machine's Node.js.
		os.WriteFile(filepath.Join(proj, "readme.mjs"), []byte(readmeJS(t)), 0o644)
		if out := sh(t, proj, env, "node readme.mjs"); out != "42\n\n" {
			t.Errorf("the README's example printed %q, want \"42\\n\\n\" (console.log of \"42\\n\")", out)
		}
	})

	t.Run("npx", func(t *testing.T) {
		line := printed(t, env, "typescript", "--npx")
		want := "npx --yes --package=" + srv.URL + "/sdk/npm/withruntime.tgz --package=" + srv.URL +
			"/sdk/npm/withruntime-cli-" + platform + ".tgz withruntime"
		if line != want {
			t.Fatalf("withruntime sdk typescript --npx printed %q, want %q", line, want)
		}
		// A fresh npm cache: npx fetches both packages from the server.
		npxEnv := slices.Concat(env, []string{"npm_config_cache=" + t.TempDir()})
		dir := t.TempDir()
		if out := sh(t, dir, npxEnv, line+" sandbox run -- echo hi"); out != "hi\n" {
			t.Errorf("%s sandbox run -- echo hi: %q, want \"hi\\n\"", line, out)
		}
		if out := sh(t, dir, npxEnv, line+" version"); !strings.HasPrefix(out, "withruntime v") {
			t.Errorf("%s version: %q", line, out)
		}
		// In a project that has the SDK (not the CLI's package) installed,
		// npx fetches only the CLI's package and runs the project's
		// launcher, which must find it in npx's cache.
		proj := t.TempDir()
		os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"npx-in-a-project","private":true}`), 0o644)
		sh(t, proj, npxEnv, printed(t, env, "typescript"))
		if out := sh(t, proj, slices.Concat(npxEnv, []string{"npm_config_cache=" + t.TempDir()}), line+" version"); !strings.HasPrefix(out, "withruntime v") {
			t.Errorf("%s version, in a project with the SDK: %q", line, out)
		}
	})
}

// pyString is s as a Python string literal.
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
