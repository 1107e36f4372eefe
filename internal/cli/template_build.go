package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

const templateBuildAbout = `Builds template NAME[:TAG] (tag latest when left out) from a Dockerfile or a
build specification, on the server: every step that changes files runs in a
sandbox of the key's account (its limits and billing apply), with no
internet unless --internet (or the specification) asks for it. Steps are cached by content:
a rebuild runs only the steps from the first one that changed.

The Dockerfile is CONTEXT/Dockerfile unless -f names another; CONTEXT
(default .) is the directory whose files COPY and ADD take, sent with the
build as a tar (symbolic links as links, never followed), without what
CONTEXT/.dockerignore names (Docker's rules). With --spec
FILE.json the build is that JSON specification (steps such as apt_install,
pip_install, run, copy, env, workdir, user; see the API's POST
/v1/templates); CONTEXT is sent only when given, and -t, when given,
replaces the specification's name.

Shows each step as it starts ("step 2/5: run ...", "(cached)" when taken
from the cache) and its output on standard error. On success prints the
template's NAME:TAG and id (the build as JSON with --json) and exits 0; a
failed build prints the step that failed and why, and exits 1.`

func (a *App) templateBuildLeaf() leaf {
	return leaf{use: "build -t NAME[:TAG] [-f Dockerfile | --spec FILE.json] [CONTEXT]", short: "build a template from a Dockerfile or build steps, on the server",
		about: templateBuildAbout, define: a.templateBuild}
}

func (a *App) templateBuild(cmd *command, s streams) runFunc {
	name := templateFlag(cmd)
	dockerfile := cmd.fs.StringP("file", "f", "", "the Dockerfile (`PATH`; default CONTEXT/Dockerfile)")
	specFile := cmd.fs.String("spec", "", "build from the JSON build specification in `FILE` instead of a Dockerfile")
	var buildArgs []string
	cmd.fs.Func("build-arg", "set the Dockerfile's ARG `NAME=VALUE` (repeatable)", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("want NAME=VALUE")
		}
		buildArgs = append(buildArgs, v)
		return nil
	})
	internet := cmd.fs.Bool("internet", false, "let the build's steps reach the internet (they have no network without it)")
	var allow []string
	cmd.fs.Func("allow", "with --internet, let the steps reach `HOST` only (exact or *.domain; repeatable)", func(v string) error {
		allow = append(allow, v)
		return nil
	})
	noCache := cmd.fs.Bool("no-cache", false, "run every step (the results are still cached for the next build)")
	asJSON := cmd.fs.Bool("json", false, "print the finished build as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) > 1 {
			return cmd.usageError(s, "want at most one CONTEXT directory, got %d arguments", len(pos))
		}
		contextDir := ""
		if len(pos) == 1 {
			contextDir = pos[0]
		}
		var spec map[string]any
		switch {
		case *specFile != "":
			if *dockerfile != "" || len(buildArgs) > 0 {
				return cmd.usageError(s, "--spec excludes -f and --build-arg (a specification may hold a dockerfile and build_args itself)")
			}
			data, err := os.ReadFile(*specFile)
			if err != nil {
				report(s.stderr, &cliError{client.CodeInvalidRequest, err.Error()})
				return exitFailure
			}
			if err := json.Unmarshal(data, &spec); err != nil || spec == nil {
				report(s.stderr, &cliError{client.CodeInvalidRequest, fmt.Sprintf("%s is not a JSON object: %v", *specFile, err)})
				return exitFailure
			}
			if *name != "" {
				spec["name"] = *name
			}
			if spec["name"] == nil {
				return cmd.usageError(s, "-t NAME[:TAG] is required: the specification names no template")
			}
		default:
			if *name == "" {
				return cmd.usageError(s, "-t NAME[:TAG] is required: the template to make")
			}
			if contextDir == "" {
				contextDir = "."
			}
			path := *dockerfile
			if path == "" {
				path = filepath.Join(contextDir, "Dockerfile")
			}
			text, err := os.ReadFile(path)
			if err != nil {
				report(s.stderr, &cliError{client.CodeInvalidRequest, err.Error()})
				return exitFailure
			}
			spec = map[string]any{"name": *name, "dockerfile": string(text)}
			if len(buildArgs) > 0 {
				args := map[string]string{}
				for _, kv := range buildArgs {
					k, v, _ := strings.Cut(kv, "=")
					args[k] = v
				}
				spec["build_args"] = args
			}
		}
		if *noCache {
			spec["no_cache"] = true
		}
		if len(allow) > 0 && !*internet {
			return cmd.usageError(s, "--allow needs --internet")
		}
		if *internet {
			n := map[string]any{"internet": true}
			if len(allow) > 0 {
				n["allow"] = allow
			}
			spec["network"] = n
		}
		var buildContext io.Reader
		if contextDir != "" {
			fi, err := os.Stat(contextDir)
			if err != nil || !fi.IsDir() {
				report(s.stderr, &cliError{client.CodeInvalidRequest, fmt.Sprintf("the build context %s is not a directory", contextDir)})
				return exitFailure
			}
			skip, err := contextSkip(contextDir)
			if err != nil {
				report(s.stderr, &cliError{client.CodeInvalidRequest, err.Error()})
				return exitFailure
			}
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(client.WriteTarSkipping(pw, contextDir, skip)) }()
			defer pr.Close()
			buildContext = pr
		}
		c, done, err := a.connect(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		b, err := c.BuildTemplate(ctx, spec, buildContext)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		fmt.Fprintf(s.stderr, "build %s of %s: %d steps\n", b.ID, b.Template, b.Steps)
		err = c.TemplateBuildLogs(ctx, b.ID, true, func(ev api.BuildLogEvent) error {
			printBuildEvent(s.stderr, ev)
			return nil
		})
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		b, err = c.GetTemplateBuild(ctx, b.ID)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			if code := printJSON(s, b); code != exitOK || b.State != api.BuildSucceeded {
				return exitFailure
			}
			return exitOK
		}
		if b.State != api.BuildSucceeded || b.Result == nil {
			msg := "the build did not finish"
			if b.Error != nil {
				msg = b.Error.Message
			}
			fmt.Fprintf(s.stderr, "withruntime: build %s failed at step %d of %d: %s\n", b.ID, b.Step, b.Steps, msg)
			return exitFailure
		}
		fmt.Fprintf(s.stderr, "built %s (%d of %d steps from the cache)\n", b.Template, b.CachedSteps, b.Steps)
		return printTemplateMade(s, b.Result, false)
	}
}

// printBuildEvent writes one event of a build's log as a person reads it.
func printBuildEvent(w io.Writer, ev api.BuildLogEvent) {
	switch ev.Type {
	case api.BuildLogStep:
		cached := ""
		if ev.Cached {
			cached = " (cached)"
		}
		fmt.Fprintf(w, "step %d/%d: %s%s\n", ev.Step, ev.Steps, ev.Message, cached)
	case api.BuildLogStdout, api.BuildLogStderr:
		io.WriteString(w, ev.Message)
	case api.BuildLogInfo:
		fmt.Fprintf(w, "  %s\n", ev.Message)
	case api.BuildLogDropped:
		fmt.Fprintf(w, "  (%d older log events dropped)\n", ev.Dropped)
	case api.BuildLogEnd:
		if ev.State == api.BuildSucceeded {
			fmt.Fprintf(w, "%s\n", ev.Message)
		}
	}
}
