package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/withruntime/withruntime/client"
)

// The SDKs are installed from the user's own server, which serves the
// packages its setup built at /sdk/ (internal/sdkdist): their names on the
// public registries are not published by this project. "withruntime sdk"
// prints the install command for the server the CLI talks to.
//
// The index's shape and the commands are internal/sdkdist's, restated
// here: the CLI links only the client side of the module (on macOS and
// Windows too), and sdkdist is the server's. sdk_test.go holds the two
// to the same commands.

// sdkIndexPath is the server's index of SDK packages (sdkIndexPath).
const sdkIndexPath = "/sdk/index.json"

// sdkFile and sdkIndex are sdkdist.File and sdkdist.Index as JSON.
type sdkFile struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Version string `json:"version"`
	Size    int64  `json:"size"`
	Alias   string `json:"alias,omitempty"`
}

type sdkIndex struct {
	Python *sdkFile            `json:"python,omitempty"`
	NPM    *sdkFile            `json:"npm,omitempty"`
	CLI    map[string]*sdkFile `json:"cli,omitempty"`
}

// sdkExtras are the Python package's extras (sdkdist.Extras).
var sdkExtras = []string{"smolagents", "langchain", "openai-agents"}

// npmPlatforms are the npm platforms with a CLI package (sdkdist.Platforms).
var npmPlatforms = []string{"linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"}

// npmPlatform is npm's name of this machine's platform ("" for one
// without a CLI package).
func npmPlatform(goos, goarch string) string {
	os := map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32"}[goos]
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[goarch]
	if p := os + "-" + arch; slices.Contains(npmPlatforms, p) {
		return p
	}
	return ""
}

// pipInstall is sdkdist.PipInstall: the requirement names the
// distribution, which pip checks against the wheel's.
func pipInstall(base string, f *sdkFile, extras []string) string {
	name := "withruntime-sdk"
	if len(extras) > 0 {
		name += "[" + strings.Join(extras, ",") + "]"
	}
	return fmt.Sprintf("pip install '%s @ %s%s'", name, base, f.Path)
}

// npxCommand is sdkdist.NPX.
func npxCommand(base string, sdk, cli *sdkFile) string {
	return fmt.Sprintf("npx --yes --package=%s --package=%s withruntime", base+sdk.Alias, base+cli.Alias)
}

func (a *App) sdkVerbs() []leaf {
	return []leaf{
		{use: "python [--extra NAME]... [--json]", short: "print the pip command that installs the Python SDK from your server",
			about: sdkPythonAbout, define: a.sdkPython},
		{use: "typescript [--npx] [--json]", short: "print the npm command that installs the TypeScript SDK from your server",
			aliases: []string{"ts", "npm"}, about: sdkTypeScriptAbout, define: a.sdkTypeScript},
	}
}

const sdkPythonAbout = `Prints the pip command that installs the Python SDK (import withruntime)
from the server this command talks to (WITHRUNTIME_BASE_URL, or the local
daemon), which serves the wheel its setup built at /sdk/python/, e.g.

  pip install 'withruntime-sdk @ http://HOST:7878/sdk/python/withruntime_sdk-0.1.0-py3-none-any.whl'

Run it in the virtual environment the SDK is for. --extra adds an agent
framework's adapter (smolagents, langchain, openai-agents), installed with
its framework from the package index. The distribution is withruntime-sdk:
"pip install withruntime" installs another project. --json prints the
server's index of packages, its paths made URLs.`

const sdkTypeScriptAbout = `Prints the npm command that installs the TypeScript SDK (import from
"withruntime") from the server this command talks to (WITHRUNTIME_BASE_URL,
or the local daemon), which serves the tarballs its setup built at
/sdk/npm/, e.g.

  npm install http://HOST:7878/sdk/npm/withruntime.tgz

With --npx, prints the npx command that runs the CLI from the server's
packages instead (its arguments follow it): the SDK's launcher and this
machine's CLI package. The npm package withruntime is not published.`

// sdkIndex fetches the server's index of SDK packages. The packages are
// public: no key is sent.
func (a *App) sdkIndex(ctx context.Context) (sdkIndex, string, error) {
	var ix sdkIndex
	c, done, err := a.connect(ctx)
	if err != nil {
		return ix, "", err
	}
	done()
	base := strings.TrimRight(c.BaseURL(), "/")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+sdkIndexPath, nil)
	if err != nil {
		return ix, "", &cliError{client.CodeInvalidRequest, err.Error()}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return ix, "", &cliError{client.CodeUnavailable, fmt.Sprintf("reading the SDK packages of %s: %v", base, err)}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return ix, "", &cliError{client.CodeUnavailable, fmt.Sprintf("reading the SDK packages of %s: %v", base, err)}
	}
	if res.StatusCode == http.StatusNotFound {
		// A server older than /sdk/ answers its API's not_found.
		return ix, "", &cliError{client.CodeNotFound, fmt.Sprintf("%s serves no SDK packages (%s answered 404): a server of this version serves them once its setup built them", base, sdkIndexPath)}
	}
	if res.StatusCode != http.StatusOK {
		return ix, "", &cliError{client.CodeInternal, fmt.Sprintf("%s answered %s for %s: %s", base, res.Status, sdkIndexPath, strings.TrimSpace(string(body)))}
	}
	if err := json.Unmarshal(body, &ix); err != nil {
		return ix, "", &cliError{client.CodeInternal, fmt.Sprintf("%s answered an index of SDK packages that is not JSON: %v", base, err)}
	}
	return ix, base, nil
}

// notBuilt is the error for a package the server does not hold.
func notBuilt(base, what string) error {
	return &cliError{client.CodeNotFound, fmt.Sprintf("%s holds no %s: its setup builds the SDK packages (scripts/sdk-build.sh in the project's checkout, run by scripts/up.sh; %s/sdk/ lists what it holds)", base, what, base)}
}

// printIndexJSON prints ix with every path made a URL of base.
func printIndexJSON(s streams, ix sdkIndex, base string) int {
	abs := func(f *sdkFile) {
		if f == nil {
			return
		}
		f.Path = base + f.Path
		if f.Alias != "" {
			f.Alias = base + f.Alias
		}
	}
	abs(ix.Python)
	abs(ix.NPM)
	for _, f := range ix.CLI {
		abs(f)
	}
	return printJSON(s, ix)
}

func (a *App) sdkPython(cmd *command, s streams) runFunc {
	var extras listValue
	cmd.fs.Var(&extras, "extra", "also install the agent framework `NAME`'s adapter: "+strings.Join(sdkExtras, ", ")+" (repeatable)")
	asJSON := cmd.fs.Bool("json", false, "print the server's index of SDK packages as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) > 0 {
			return cmd.usageError(s, "unexpected argument %q", pos[0])
		}
		for _, e := range extras {
			if !slices.Contains(sdkExtras, e) {
				return cmd.usageError(s, "--extra %q: want one of %s", e, strings.Join(sdkExtras, ", "))
			}
		}
		ix, base, err := a.sdkIndex(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			return printIndexJSON(s, ix, base)
		}
		if ix.Python == nil {
			report(s.stderr, notBuilt(base, "Python SDK wheel"))
			return exitFailure
		}
		fmt.Fprintln(s.stdout, pipInstall(base, ix.Python, extras))
		return exitOK
	}
}

func (a *App) sdkTypeScript(cmd *command, s streams) runFunc {
	npx := cmd.fs.Bool("npx", false, "print the npx command that runs the CLI from the server's packages (on this machine's platform)")
	asJSON := cmd.fs.Bool("json", false, "print the server's index of SDK packages as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) > 0 {
			return cmd.usageError(s, "unexpected argument %q", pos[0])
		}
		ix, base, err := a.sdkIndex(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			return printIndexJSON(s, ix, base)
		}
		if ix.NPM == nil {
			report(s.stderr, notBuilt(base, "TypeScript SDK tarball"))
			return exitFailure
		}
		if !*npx {
			fmt.Fprintln(s.stdout, "npm install "+base+ix.NPM.Alias)
			return exitOK
		}
		platform := npmPlatform(runtime.GOOS, runtime.GOARCH)
		cli := ix.CLI[platform]
		if cli == nil {
			have := make([]string, 0, len(ix.CLI))
			for _, p := range npmPlatforms {
				if ix.CLI[p] != nil {
					have = append(have, p)
				}
			}
			held := strings.Join(have, ", ")
			if held == "" {
				held = "none"
			}
			report(s.stderr, &cliError{client.CodeNotFound, fmt.Sprintf("%s holds no CLI package for %s/%s (it holds: %s)",
				base, runtime.GOOS, runtime.GOARCH, held)})
			return exitFailure
		}
		fmt.Fprintln(s.stdout, npxCommand(base, ix.NPM, cli))
		return exitOK
	}
}
