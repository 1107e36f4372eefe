package sdkdist

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// packages writes a package directory as scripts/sdk-build.sh leaves it,
// with an older version beside the newer, a stray file and a link out of
// it.
func packages(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("python/withruntime_sdk-0.1.0-py3-none-any.whl", "wheel 0.1.0")
	write("python/withruntime_sdk-0.10.0-py3-none-any.whl", "wheel 0.10.0")
	write("python/withruntime_sdk-0.9.0-py3-none-any.whl", "wheel 0.9.0")
	write("npm/withruntime-0.1.0.tgz", "npm 0.1.0")
	write("npm/withruntime-cli-linux-x64-0.1.0.tgz", "cli linux-x64 0.1.0")
	write("npm/notes.txt", "not a package")
	write("secret.txt", "outside the served folders")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "npm", "withruntime-cli-linux-arm64-0.1.0.tgz")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func get(t *testing.T, h http.Handler, method, target string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, "http://sdk.test:7878/", nil)
	// The path as sent, not cleaned by a client: traversal attempts reach
	// the handler verbatim.
	r.URL.Path, r.RequestURI = target, target
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServesPackagesByExactNameAndAlias(t *testing.T) {
	h := Mount(packages(t), http.NotFoundHandler())
	for _, c := range []struct{ path, want, ctype, cache string }{
		{"/sdk/python/withruntime_sdk-0.10.0-py3-none-any.whl", "wheel 0.10.0", "application/zip", "public, max-age=3600"},
		{"/sdk/python/withruntime_sdk-0.9.0-py3-none-any.whl", "wheel 0.9.0", "application/zip", "public, max-age=3600"},
		{"/sdk/npm/withruntime-0.1.0.tgz", "npm 0.1.0", "application/gzip", "public, max-age=3600"},
		{"/sdk/npm/withruntime.tgz", "npm 0.1.0", "application/gzip", "no-cache"},
		{"/sdk/npm/withruntime-cli-linux-x64.tgz", "cli linux-x64 0.1.0", "application/gzip", "no-cache"},
		{"/sdk/npm/withruntime-cli-linux-x64-0.1.0.tgz", "cli linux-x64 0.1.0", "application/gzip", "public, max-age=3600"},
	} {
		res := get(t, h, http.MethodGet, c.path)
		if got := body(t, res); res.StatusCode != 200 || got != c.want {
			t.Errorf("GET %s: %d %q, want 200 %q", c.path, res.StatusCode, got, c.want)
		}
		if got := res.Header.Get("Content-Type"); got != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.ctype)
		}
		if got := res.Header.Get("Cache-Control"); got != c.cache {
			t.Errorf("GET %s: Cache-Control %q, want %q", c.path, got, c.cache)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q", c.path, got)
		}
	}
}

func TestHeadAnswersTheLengthWithoutABody(t *testing.T) {
	h := Mount(packages(t), http.NotFoundHandler())
	res := get(t, h, http.MethodHead, "/sdk/npm/withruntime.tgz")
	if b := body(t, res); res.StatusCode != 200 || b != "" {
		t.Fatalf("HEAD: %d with body %q, want 200 and none", res.StatusCode, b)
	}
	if got := res.Header.Get("Content-Length"); got != "9" {
		t.Errorf("HEAD: Content-Length %q, want 9", got)
	}
	if got := res.Header.Get("Content-Type"); got != "application/gzip" {
		t.Errorf("HEAD: Content-Type %q", got)
	}
}

func TestRefusesWhatIsNotAPackage(t *testing.T) {
	h := Mount(packages(t), http.NotFoundHandler())
	for _, p := range []string{
		"/sdk/npm/notes.txt",              // a file there, not of a package's shape
		"/sdk/secret.txt",                 // a file in the folder, outside the served ones
		"/sdk/python/",                    // no directory listing
		"/sdk/npm",                        //
		"/sdk/python/withruntime_sdk.whl", // no alias for the wheel: pip needs the version
		"/sdk/npm/withruntime-cli-linux-arm64-0.1.0.tgz",      // a link, not served
		"/sdk/npm/withruntime-cli-linux-arm64.tgz",            // its alias neither
		"/sdk/npm/../secret.txt",                              // traversal
		"/sdk/npm/../../../../etc/passwd",                     //
		"/sdk/python/..%2fsecret.txt",                         //
		"/sdk/npm//withruntime-0.1.0.tgz",                     // not the exact name
		"/sdk/npm/withruntime-0.1.0.tgz/",                     //
		"/sdk/npm/WITHRUNTIME-0.1.0.TGZ",                      //
		"/sdk/npm/withruntime-cli-plan9-x64-0.1.0.tgz",        //
		"/sdk/python/withruntime_sdk-0.1.0-py3-none-any.whl ", //
	} {
		res := get(t, h, http.MethodGet, p)
		b := body(t, res)
		var e struct{ Error struct{ Code string } }
		if res.StatusCode != 404 || json.Unmarshal([]byte(b), &e) != nil || e.Error.Code != "not_found" {
			t.Errorf("GET %q: %d %q, want 404 not_found", p, res.StatusCode, b)
		}
		if strings.Contains(b, "outside the served") || strings.Contains(b, "root:") {
			t.Errorf("GET %q leaked a file: %q", p, b)
		}
	}
}

func TestRefusesWrites(t *testing.T) {
	h := Mount(packages(t), http.NotFoundHandler())
	for _, m := range []string{http.MethodPut, http.MethodPost, http.MethodDelete} {
		res := get(t, h, m, "/sdk/npm/withruntime.tgz")
		var e struct{ Error struct{ Code string } }
		json.Unmarshal([]byte(body(t, res)), &e)
		if res.StatusCode != http.StatusMethodNotAllowed || e.Error.Code != "invalid_request" || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d %q Allow %q, want 405 invalid_request, Allow GET, HEAD", m, res.StatusCode, e.Error.Code, res.Header.Get("Allow"))
		}
	}
}

func TestOtherPathsGoToTheAPI(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api") })
	h := Mount(packages(t), api)
	for _, p := range []string{"/v1/health", "/sdkx", "/", "/v1/sdk/npm/withruntime.tgz"} {
		if b := body(t, get(t, h, http.MethodGet, p)); b != "api" {
			t.Errorf("GET %s: %q, want the API's answer", p, b)
		}
	}
}

func TestIndex(t *testing.T) {
	h := Mount(packages(t), http.NotFoundHandler())
	res := get(t, h, http.MethodGet, "/sdk/index.json")
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("index.json: %d %q", res.StatusCode, ct)
	}
	var ix Index
	if err := json.Unmarshal([]byte(body(t, res)), &ix); err != nil {
		t.Fatal(err)
	}
	if ix.Python == nil || ix.Python.Version != "0.10.0" || ix.Python.Path != "/sdk/python/withruntime_sdk-0.10.0-py3-none-any.whl" || ix.Python.Size != 12 {
		t.Errorf("python: %+v, want the newest wheel, 0.10.0", ix.Python)
	}
	if ix.NPM == nil || ix.NPM.Alias != "/sdk/npm/withruntime.tgz" || ix.NPM.Version != "0.1.0" {
		t.Errorf("npm: %+v", ix.NPM)
	}
	if len(ix.CLI) != 1 || ix.CLI["linux-x64"] == nil || ix.CLI["linux-x64"].Alias != "/sdk/npm/withruntime-cli-linux-x64.tgz" {
		t.Errorf("cli: %+v, want linux-x64 only (the arm64 one is a link)", ix.CLI)
	}

	for _, p := range []string{"/sdk/", "/sdk"} {
		res = get(t, h, http.MethodGet, p)
		text := body(t, res)
		if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/plain; charset=utf-8" {
			t.Fatalf("%s: %d %q", p, res.StatusCode, ct)
		}
		for _, want := range []string{
			"pip install 'withruntime-sdk[smolagents] @ http://sdk.test:7878/sdk/python/withruntime_sdk-0.10.0-py3-none-any.whl'",
			"npm install http://sdk.test:7878/sdk/npm/withruntime.tgz",
			"PLATFORM: linux-x64\n",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q:\n%s", p, want, text)
			}
		}
	}
}

func TestEmptyOrMissingFolder(t *testing.T) {
	h := Handler(filepath.Join(t.TempDir(), "none"))
	res := get(t, h, http.MethodGet, "/sdk/")
	if b := body(t, res); res.StatusCode != 200 || !strings.Contains(b, "holds no SDK packages") {
		t.Errorf("/sdk/ without packages: %d %q", res.StatusCode, b)
	}
	if res := get(t, h, http.MethodGet, "/sdk/npm/withruntime.tgz"); res.StatusCode != 404 {
		t.Errorf("a package without packages: %d, want 404", res.StatusCode)
	}
}

func TestInstallCommands(t *testing.T) {
	ix, err := Scan(packages(t))
	if err != nil {
		t.Fatal(err)
	}
	c := InstallCommands(ix, "http://h:1/", "linux-x64")
	if want := "pip install 'withruntime-sdk @ http://h:1/sdk/python/withruntime_sdk-0.10.0-py3-none-any.whl'"; c.PythonBare != want {
		t.Errorf("python: %q, want %q", c.PythonBare, want)
	}
	if want := "npx --yes --package=http://h:1/sdk/npm/withruntime.tgz --package=http://h:1/sdk/npm/withruntime-cli-linux-x64.tgz withruntime"; c.NPX != want {
		t.Errorf("npx: %q, want %q", c.NPX, want)
	}
	if c := InstallCommands(ix, "http://h:1", "linux-arm64"); c.NPX != "" || c.NPM == "" {
		t.Errorf("a platform without a CLI package: %+v, want npm install only", c)
	}
}
