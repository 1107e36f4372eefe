package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sdkdist"
)

// sdkServer serves a package folder at /sdk/ as the server does, and
// refuses the rest as a server without a key would.
func sdkServer(t *testing.T, files ...string) (url, dir string) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"code": "not_found", "message": "no route"}})
	})
	srv := httptest.NewServer(sdkdist.Mount(dir, api))
	t.Cleanup(srv.Close)
	useServer(t, srv.URL)
	return srv.URL, dir
}

func TestSDKPrintsTheInstallCommands(t *testing.T) {
	platform := sdkdist.NPMPlatform(runtime.GOOS, runtime.GOARCH)
	url, dir := sdkServer(t, "python/withruntime_sdk-0.1.0-py3-none-any.whl", "npm/withruntime-0.1.0.tgz",
		"npm/withruntime-cli-"+platform+"-0.1.0.tgz")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sdk", "python"}, "pip install 'withruntime-sdk @ " + url + "/sdk/python/withruntime_sdk-0.1.0-py3-none-any.whl'\n"},
		{[]string{"sdk", "python", "--extra", "smolagents", "--extra", "langchain"},
			"pip install 'withruntime-sdk[smolagents,langchain] @ " + url + "/sdk/python/withruntime_sdk-0.1.0-py3-none-any.whl'\n"},
		{[]string{"sdk", "typescript"}, "npm install " + url + "/sdk/npm/withruntime.tgz\n"},
		{[]string{"sdk", "typescript", "--npx"}, "npx --yes --package=" + url + "/sdk/npm/withruntime.tgz --package=" + url +
			"/sdk/npm/withruntime-cli-" + platform + ".tgz withruntime\n"},
	} {
		code, stdout, stderr := run(t, nil, c.args...)
		if code != 0 || stdout != c.want {
			t.Errorf("%v: exit %d, %q (stderr %q), want %q", c.args, code, stdout, stderr, c.want)
		}
	}

	// The CLI restates sdkdist's commands (it does not link the server's
	// package): they must be the same.
	held, err := sdkdist.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	same := sdkdist.InstallCommands(held, url, platform)
	for args, want := range map[string]string{"python": same.PythonBare, "python --extra smolagents": same.Python,
		"typescript": same.NPM, "typescript --npx": same.NPX} {
		if _, out, _ := run(t, nil, append([]string{"sdk"}, strings.Fields(args)...)...); out != want+"\n" {
			t.Errorf("sdk %s: %q, sdkdist says %q", args, out, want)
		}
	}

	code, stdout, _ := run(t, nil, "sdk", "python", "--json")
	var ix sdkdist.Index
	if err := json.Unmarshal([]byte(stdout), &ix); code != 0 || err != nil || ix.Python == nil ||
		ix.Python.Path != url+"/sdk/python/withruntime_sdk-0.1.0-py3-none-any.whl" || ix.NPM == nil || ix.NPM.Alias != url+"/sdk/npm/withruntime.tgz" {
		t.Errorf("--json: exit %d, %s", code, stdout)
	}
}

func TestSDKRestatesSdkdist(t *testing.T) {
	if !slices.Equal(sdkExtras, sdkdist.Extras) || !slices.Equal(npmPlatforms, sdkdist.Platforms) || sdkIndexPath != sdkdist.IndexPath {
		t.Errorf("extras %v, platforms %v, index %s; sdkdist has %v, %v, %s", sdkExtras, npmPlatforms, sdkIndexPath,
			sdkdist.Extras, sdkdist.Platforms, sdkdist.IndexPath)
	}
	for _, goos := range []string{"linux", "darwin", "windows", "freebsd"} {
		for _, goarch := range []string{"amd64", "arm64", "386"} {
			if got, want := npmPlatform(goos, goarch), sdkdist.NPMPlatform(goos, goarch); got != want {
				t.Errorf("%s/%s: %q, sdkdist says %q", goos, goarch, got, want)
			}
		}
	}
	// Every field of the index survives the CLI's reading of it.
	ix := sdkdist.Index{Python: &sdkdist.File{Name: "n", Path: "/p", Version: "1.2.3", Size: 7, Alias: "/a"}}
	b, _ := json.Marshal(ix)
	var mine sdkIndex
	json.Unmarshal(b, &mine)
	back, _ := json.Marshal(mine)
	if string(back) != string(b) {
		t.Errorf("the CLI reads %s as %s", b, back)
	}
}

func TestSDKWithoutPackages(t *testing.T) {
	url, _ := sdkServer(t, "npm/withruntime-0.1.0.tgz")
	code, stdout, stderr := run(t, nil, "sdk", "python")
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "error: not_found: "+url+" holds no Python SDK wheel") {
		t.Errorf("no wheel: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = run(t, nil, "sdk", "typescript", "--npx")
	if code != 1 || !strings.Contains(stderr, "holds no CLI package for "+runtime.GOOS+"/"+runtime.GOARCH+" (it holds: none)") {
		t.Errorf("no CLI package: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, nil, "sdk", "python", "--extra", "numpy")
	if code != 2 || !strings.Contains(stderr, `--extra "numpy": want one of smolagents, langchain, openai-agents`) {
		t.Errorf("unknown extra: exit %d, stderr %q", code, stderr)
	}
}

// A server without /sdk/ (an older one) answers its API's 404.
func TestSDKOfAServerWithoutPackages(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"code": "not_found", "message": "no route"}})
	}))
	t.Cleanup(srv.Close)
	useServer(t, srv.URL)
	code, _, stderr := run(t, nil, "sdk", "typescript")
	if code != 1 || !strings.Contains(stderr, "error: not_found: "+srv.URL+" serves no SDK packages") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
