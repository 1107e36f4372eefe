// Package sdkdist serves the SDK packages a server was set up with, so that
// a user installs the Python and TypeScript SDKs (and the CLI through npm)
// from their own withruntime server: the package names on the public
// registries are not the project's to rely on, and a machine that reaches
// the server reaches its packages.
//
// The packages are files in a directory (by default the cache's sdk/,
// filled by scripts/sdk-build.sh at setup):
//
//	python/withruntime_sdk-VERSION-py3-none-any.whl
//	npm/withruntime-VERSION.tgz
//	npm/withruntime-cli-PLATFORM-VERSION.tgz
//
// They are public and read-only: anyone who reaches the server may fetch
// them, as anyone may fetch them from a registry, and they hold no secret.
// Only names of those shapes are served, looked up among the directory's
// regular files, so a request never names a path of its own; there is no
// listing of the directory, only the index of what is there. The npm names
// also have an alias without the version (withruntime.tgz), for a command
// that keeps working after an upgrade; pip reads a wheel's version from its
// file name, so the wheel has none.
package sdkdist

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// Prefix is the path below which the packages are served.
const Prefix = "/sdk/"

// IndexPath is the index as JSON (Index).
const IndexPath = Prefix + "index.json"

// Distribution is the Python package's name on an index and in pip's
// requirements; its import name is withruntime.
const Distribution = "withruntime-sdk"

// NPMPackage is the npm package's name, which a program imports.
const NPMPackage = "withruntime"

// Platforms are the npm platforms (process.platform-process.arch) with a
// CLI package, as scripts/npm-pack.sh builds them.
var Platforms = []string{"linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"}

// A version as the build scripts write them: digits first, then letters,
// digits, dots, pluses and dashes only.
const versionRE = `([0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)`

var (
	wheelName = regexp.MustCompile(`^withruntime_sdk-` + versionRE + `-py3-none-any\.whl$`)
	npmName   = regexp.MustCompile(`^withruntime-` + versionRE + `\.tgz$`)
	cliName   = regexp.MustCompile(`^withruntime-cli-(` + strings.Join(Platforms, "|") + `)-` + versionRE + `\.tgz$`)
)

// File is one package the server holds.
type File struct {
	// Name is the file's name; Path the URL path it is served at.
	Name    string `json:"name"`
	Path    string `json:"path"`
	Version string `json:"version"`
	Size    int64  `json:"size"`
	// Alias is a URL path that serves the newest file of this kind, whatever
	// its version (npm files only).
	Alias string `json:"alias,omitempty"`

	file string // on disk
}

// Index is what the server holds, as GET /sdk/index.json answers it. A
// package the server was not set up with is missing.
type Index struct {
	// Python is the wheel: install it as Distribution @ URL.
	Python *File `json:"python,omitempty"`
	// NPM is the TypeScript SDK and the npx launcher.
	NPM *File `json:"npm,omitempty"`
	// CLI holds the CLI's npm package per platform; the launcher of NPM
	// runs it.
	CLI map[string]*File `json:"cli,omitempty"`

	// all holds every package file, older versions too: a versioned
	// name keeps working while its file is there.
	all []*File
}

// Scan reads the index of dir. A missing directory holds nothing.
func Scan(dir string) (Index, error) {
	var ix Index
	newest := func(cur *File, f *File) *File {
		if cur == nil || compareVersions(f.Version, cur.Version) > 0 {
			return f
		}
		return cur
	}
	wheels, err := regularFiles(filepath.Join(dir, "python"))
	if err != nil {
		return ix, err
	}
	for _, name := range wheels {
		if m := wheelName.FindStringSubmatch(name); m != nil {
			f := &File{Name: name, Version: m[1], Path: Prefix + "python/" + name, file: filepath.Join(dir, "python", name)}
			ix.Python = newest(ix.Python, f)
			ix.all = append(ix.all, f)
		}
	}
	tarballs, err := regularFiles(filepath.Join(dir, "npm"))
	if err != nil {
		return ix, err
	}
	for _, name := range tarballs {
		f := &File{Name: name, Path: Prefix + "npm/" + name, file: filepath.Join(dir, "npm", name)}
		if m := npmName.FindStringSubmatch(name); m != nil {
			f.Version, f.Alias = m[1], Prefix+"npm/withruntime.tgz"
			ix.NPM = newest(ix.NPM, f)
			ix.all = append(ix.all, f)
		} else if m := cliName.FindStringSubmatch(name); m != nil {
			f.Version, f.Alias = m[2], Prefix+"npm/withruntime-cli-"+m[1]+".tgz"
			if ix.CLI == nil {
				ix.CLI = map[string]*File{}
			}
			ix.CLI[m[1]] = newest(ix.CLI[m[1]], f)
			ix.all = append(ix.all, f)
		}
	}
	for _, f := range ix.all {
		fi, err := os.Stat(f.file)
		if err != nil {
			return ix, err
		}
		f.Size = fi.Size()
	}
	return ix, nil
}

// files are the index's files.
func (ix Index) files() []*File {
	var fs []*File
	if ix.Python != nil {
		fs = append(fs, ix.Python)
	}
	if ix.NPM != nil {
		fs = append(fs, ix.NPM)
	}
	for _, p := range Platforms {
		if f := ix.CLI[p]; f != nil {
			fs = append(fs, f)
		}
	}
	return fs
}

// lookup returns the file served at the URL path p: any version by its
// name, the newest by its alias.
func (ix Index) lookup(p string) *File {
	for _, f := range ix.all {
		if p == f.Path {
			return f
		}
	}
	for _, f := range ix.files() {
		if p == f.Alias {
			return f
		}
	}
	return nil
}

// regularFiles returns the names of the regular files in dir (not links:
// one could point anywhere).
func regularFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// compareVersions compares the dotted numbers that start a and b, then the
// rest as text.
func compareVersions(a, b string) int {
	na, ra := leadingNumbers(a)
	nb, rb := leadingNumbers(b)
	for i := range 3 {
		if na[i] != nb[i] {
			if na[i] < nb[i] {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(ra, rb)
}

func leadingNumbers(v string) ([3]int, string) {
	var n [3]int
	for i := range 3 {
		j := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
		if j < 0 {
			j = len(v)
		}
		n[i], _ = strconv.Atoi(v[:j])
		v = v[j:]
		if i < 2 {
			v = strings.TrimPrefix(v, ".")
		}
	}
	return n, v
}

// Commands are the install commands for the server at baseURL (no
// trailing slash) and the npm platform of the user's machine (a CLI
// package is named only when the server holds one for it).
type Commands struct {
	Python     string // pip install of the SDK with the smolagents adapter's extra
	PythonBare string // pip install of the SDK alone
	NPM        string // npm install of the TypeScript SDK
	NPX        string // npx running the CLI ("" without a CLI package for platform)
}

// Extras are the Python package's extras: the frameworks of its agent
// adapters.
var Extras = []string{"smolagents", "langchain", "openai-agents"}

// InstallCommands returns the commands that install what ix holds from
// baseURL. Missing packages give empty commands.
func InstallCommands(ix Index, baseURL, platform string) Commands {
	var c Commands
	if ix.Python != nil {
		c.PythonBare = PipInstall(baseURL, ix.Python, nil)
		c.Python = PipInstall(baseURL, ix.Python, []string{"smolagents"})
	}
	if ix.NPM != nil {
		c.NPM = NPMInstall(baseURL, ix.NPM)
		if cli := ix.CLI[platform]; cli != nil {
			c.NPX = NPX(baseURL, ix.NPM, cli)
		}
	}
	return c
}

// PipInstall is the pip command that installs the wheel f from baseURL,
// with extras. The requirement names the distribution: pip checks it
// against the wheel's.
func PipInstall(baseURL string, f *File, extras []string) string {
	name := Distribution
	if len(extras) > 0 {
		name += "[" + strings.Join(extras, ",") + "]"
	}
	return fmt.Sprintf("pip install '%s @ %s%s'", name, strings.TrimRight(baseURL, "/"), f.Path)
}

// NPMInstall is the npm command that installs the TypeScript SDK f from
// baseURL, by its alias.
func NPMInstall(baseURL string, f *File) string {
	return "npm install " + strings.TrimRight(baseURL, "/") + f.Alias
}

// NPX is the npx command (its arguments to follow) that runs the CLI of
// the package cli through the launcher of the package sdk. --yes: npx
// would ask before installing packages it has not seen.
func NPX(baseURL string, sdk, cli *File) string {
	baseURL = strings.TrimRight(baseURL, "/")
	return fmt.Sprintf("npx --yes --package=%s --package=%s withruntime", baseURL+sdk.Alias, baseURL+cli.Alias)
}

// NPMPlatform is npm's name (process.platform-process.arch) of a Go
// platform, "" for one without a CLI package.
func NPMPlatform(goos, goarch string) string {
	os := map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32"}[goos]
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[goarch]
	p := os + "-" + arch
	for _, q := range Platforms {
		if p == q {
			return p
		}
	}
	return ""
}

// Handler serves the packages in dir at Prefix: GET or HEAD of a package's
// path or alias, of the index (index.json), or of Prefix itself, which
// answers the install commands as text for people.
func Handler(dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "invalid_request",
				fmt.Sprintf("%s %s is not served: the SDK packages are read with GET", r.Method, r.URL.Path))
			return
		}
		ix, err := Scan(dir)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "reading the SDK packages: "+err.Error())
			return
		}
		switch p := r.URL.Path; p {
		case strings.TrimSuffix(Prefix, "/"), Prefix:
			h.Set("Content-Type", "text/plain; charset=utf-8")
			h.Set("Cache-Control", "no-cache")
			fmt.Fprint(w, indexText(ix, "http://"+r.Host))
		case IndexPath:
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-cache")
			json.NewEncoder(w).Encode(ix)
		default:
			f := ix.lookup(p)
			if f == nil {
				writeError(w, http.StatusNotFound, "not_found",
					fmt.Sprintf("no SDK package at %s (%s lists those this server holds)", p, Prefix))
				return
			}
			serveFile(w, r, f, p == f.Alias)
		}
	})
}

func serveFile(w http.ResponseWriter, r *http.Request, f *File, alias bool) {
	fd, err := os.Open(f.file)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", "the SDK package "+f.Name+" is gone (the server's setup rewrote it): try again")
		return
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		writeError(w, http.StatusNotFound, "not_found", "the SDK package "+f.Name+" is gone: try again")
		return
	}
	h := w.Header()
	if strings.HasSuffix(f.Name, ".whl") {
		h.Set("Content-Type", "application/zip")
	} else {
		h.Set("Content-Type", "application/gzip")
	}
	// A versioned name always holds the same bytes, unless the same
	// version is rebuilt; an alias moves with each upgrade.
	if alias {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Cache-Control", "public, max-age=3600")
	}
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", f.Name))
	http.ServeContent(w, r, f.Name, fi.ModTime(), fd)
}

// indexText is the index for people: what is there and how to install it.
func indexText(ix Index, baseURL string) string {
	var b strings.Builder
	if len(ix.files()) == 0 {
		b.WriteString("This server holds no SDK packages: its setup builds them (scripts/sdk-build.sh).\n")
		return b.String()
	}
	b.WriteString("The SDK packages of this withruntime server.\n")
	if ix.Python != nil {
		c := InstallCommands(ix, baseURL, "")
		fmt.Fprintf(&b, "\nPython SDK %s (import withruntime; extras: smolagents, langchain, openai-agents):\n  %s\n  %s\n",
			ix.Python.Version, c.PythonBare, c.Python)
	}
	if ix.NPM != nil {
		c := InstallCommands(ix, baseURL, "")
		fmt.Fprintf(&b, "\nTypeScript SDK %s (import from \"withruntime\"):\n  %s\n", ix.NPM.Version, c.NPM)
	}
	if len(ix.CLI) > 0 && ix.NPM != nil {
		b.WriteString("\nThe CLI through npx (PLATFORM: this machine's; the launcher runs the CLI of its package):\n")
		fmt.Fprintf(&b, "  npx --yes --package=%s --package=%s withruntime version\n",
			baseURL+ix.NPM.Alias, baseURL+Prefix+"npm/withruntime-cli-PLATFORM.tgz")
		var ps []string
		for _, p := range Platforms {
			if ix.CLI[p] != nil {
				ps = append(ps, p)
			}
		}
		fmt.Fprintf(&b, "  PLATFORM: %s\n", strings.Join(ps, ", "))
	}
	b.WriteString("\nFiles:\n")
	for _, f := range ix.files() {
		fmt.Fprintf(&b, "  %s%s (%d bytes)\n", baseURL, f.Path, f.Size)
	}
	fmt.Fprintf(&b, "\nAs JSON: %s%s\n", baseURL, IndexPath)
	return b.String()
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Cache-Control")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: message}})
}

// Mount routes the requests below Prefix (and Prefix without its slash) to
// the packages in dir, and every other request to next.
func Mount(dir string, next http.Handler) http.Handler {
	sdk := Handler(dir)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(r.URL.Path, Prefix) {
			sdk.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
