package readme

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// The READMEs whose examples run, relative to the checkout.
var readmes = []string{"README.md", "sdk/python/README.md", "sdk/typescript/README.md"}

// maxSkipsCI bounds the examples a CI run may leave out: each needs its
// reason in its marker, and there must stay few of them.
const maxSkipsCI = 4

// pyenv is the Python environment scripts/pyenv.sh makes, with the pinned
// frameworks the agent examples import.
const pyenv = "/var/cache/withruntime/pyenv/bin/python"

// managerPy is my_agents/manager.py, the local program the SDK examples
// upload and run.
const managerPy = "import sys\nprint('manager.py ran with', sys.argv[1:])\n"

func requireTool(t *testing.T, path, why string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have %s (%s): %v", path, why, err)
		}
		t.Skipf("%s is missing (%s): %v", path, why, err)
	}
}

func TestParse(t *testing.T) {
	text := "x\n<!-- example: skip needs the internet -->\n```sh\ncurl x # prints `a b`\n```\n\n" +
		"<!-- example: given sbx (from above); standin -->\n\n```python\nprint(1)  # prints 1: one\n```\n" +
		"  ```ts\n  const a = 1;\n  ```\n```json\n{}\n```\n```console\n$ echo hi\nhi\n```\n"
	exs, err := Parse("R.md", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 5 {
		t.Fatalf("got %d blocks: %+v", len(exs), exs)
	}
	if exs[0].Skip != "needs the internet" || exs[0].Lang != "sh" || !slices.Equal(exs[0].Expected(), []string{"a b"}) {
		t.Errorf("first block: %+v %q", exs[0], exs[0].Expected())
	}
	if !exs[1].Standin || !slices.Equal(exs[1].Given, []string{"sbx"}) || exs[1].Line != 9 || !slices.Equal(exs[1].Expected(), []string{"1"}) {
		t.Errorf("second block: %+v", exs[1])
	}
	if exs[2].Lang != "ts" || exs[2].Code != "const a = 1;\n" {
		t.Errorf("indented block: %+v", exs[2])
	}
	if exs[3].Lang != "" || exs[4].Code != "echo hi\n" {
		t.Errorf("json and console blocks: %+v %+v", exs[3], exs[4])
	}
	for _, bad := range []string{"<!-- example: skip -->\n```sh\nx\n```\n", "<!-- example: maybe -->\n```sh\nx\n```\n", "```sh\nx\n"} {
		if _, err := Parse("R.md", bad); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
	if got := (Example{Code: "ID=$(x)\nexport K=v\necho $ID\n"}).Assigned(); !slices.Equal(got, []string{"ID", "K"}) {
		t.Errorf("Assigned: %q", got)
	}
}

// TestExamples runs every example of the READMEs against one real server,
// in the order of each file, and prints what ran and what was skipped.
func TestExamples(t *testing.T) {
	root := testenv.Root()
	var all []Example
	for _, f := range readmes {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		exs, err := Parse(f, string(b))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, exs...)
	}

	srv := testenv.StartServer(t)
	cli := testenv.CLI(t)
	home := t.TempDir()
	// The shell examples find a python3 and pip of a virtual environment of
	// their own first, so that what they install (the SDK from the
	// server's /sdk/) goes there and nowhere else.
	venv := filepath.Join(home, "venv")
	if b, err := exec.Command("python3", "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, b)
	}
	base := append(srv.Env(),
		// The examples' CLI keeps its state here, not in the user's.
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"),
		// Examples that store a model service's key read it from here; it
		// is no key, and nothing sends it anywhere but the sandbox's proxy.
		"OPENAI_API_KEY=sk-readme-example-not-a-key",
		"PYTHONUNBUFFERED=1",
	)
	path := filepath.Dir(cli) + string(os.PathListSeparator) + os.Getenv("PATH")
	shellEnv := append(slices.Clone(base), "PATH="+filepath.Join(venv, "bin")+string(os.PathListSeparator)+path, "VIRTUAL_ENV="+venv)
	// The Python and TypeScript examples use the SDKs of this checkout.
	env := append(slices.Clone(base), "PATH="+path, "PYTHONPATH="+filepath.Join(root, "sdk", "python"))

	var ts *tsProject
	type outcome struct {
		ex  Example
		how string
	}
	var ran, skipped []outcome
	dirs := map[string]string{}
	for _, ex := range all {
		if ex.Lang == "" {
			continue
		}
		dir, ok := dirs[ex.File]
		if !ok {
			// Each README's examples share a working directory (and, for the
			// shell, their variables), as in one terminal.
			dir = t.TempDir()
			must(t, os.MkdirAll(filepath.Join(dir, "my_agents"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "my_agents", "manager.py"), []byte(managerPy), 0o644))
			dirs[ex.File] = dir
		}
		name := strings.NewReplacer("/", "_", ".", "_").Replace(fmt.Sprintf("%s:%d", ex.File, ex.Line))
		if ex.Skip != "" {
			skipped = append(skipped, outcome{ex, ex.Skip})
			continue
		}
		t.Run(name, func(t *testing.T) {
			var out string
			switch ex.Lang {
			case "sh":
				out = runShell(t, ex, dir, shellEnv)
			case "python":
				requireTool(t, pyenv, "scripts/pyenv.sh makes it")
				out = runPython(t, ex, dir, env)
			case "ts":
				if ts == nil {
					ts = newTSProject(t, root, all)
				}
				out = ts.run(t, ex, dir, env)
			}
			for _, want := range ex.Expected() {
				if !strings.Contains(out, want) {
					t.Errorf("%s: the text says it prints %q; its output:\n%s", ex, want, out)
				}
			}
		})
		how := "as written"
		if ex.Standin {
			how = "with the model stand-ins"
		}
		if len(ex.Given) > 0 {
			how += ", given " + strings.Join(ex.Given, " ")
		}
		ran = append(ran, outcome{ex, how})
	}

	var sum strings.Builder
	fmt.Fprintf(&sum, "README examples: %d ran, %d skipped\n", len(ran), len(skipped))
	for _, o := range ran {
		fmt.Fprintf(&sum, "  ran      %s %s\n", o.ex, o.how)
	}
	for _, o := range skipped {
		fmt.Fprintf(&sum, "  skipped  %s: %s\n", o.ex, o.how)
	}
	t.Log("\n" + sum.String())
	fmt.Print(sum.String())
	if len(ran) == 0 {
		t.Fatal("no example ran")
	}
	if os.Getenv("CI") != "" && len(skipped) > maxSkipsCI {
		t.Errorf("%d examples are skipped, more than the %d CI allows: run them (a stand-in, a given) instead", len(skipped), maxSkipsCI)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// run runs cmd with a time limit and returns its output (stdout and stderr
// together), failing the test on a non-zero exit.
func run(t *testing.T, ex Example, cmd *exec.Cmd) string {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s failed: %v\n--- example\n%s--- output\n%s", ex, err, ex.Code, out.String())
	}
	t.Logf("%s output:\n%s", ex, out.String())
	return out.String()
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// runShell runs a shell block with bash -e in its README's directory, after
// the variables its earlier blocks set, and keeps those it sets for the
// next.
func runShell(t *testing.T, ex Example, dir string, env []string) string {
	state := filepath.Join(dir, ".example-vars")
	var script strings.Builder
	fmt.Fprintf(&script, "if [ -f %q ]; then . %q; fi\n", state, state)
	script.WriteString(ex.Code)
	for _, v := range ex.Assigned() {
		fmt.Fprintf(&script, "declare -p %s >> %q\n", v, state)
	}
	cmd := exec.CommandContext(timeout(t), "bash", "-e", "-o", "pipefail", "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	return run(t, ex, cmd)
}

func runPython(t *testing.T, ex Example, dir string, env []string) string {
	f := filepath.Join(t.TempDir(), "example.py")
	must(t, os.WriteFile(f, []byte(ex.Code), 0o644))
	args := []string{filepath.Join(testenv.Root(), "test", "readme", "run_example.py"), f, fmt.Sprintf("%s:%d", ex.File, ex.Line+1)}
	if ex.Standin {
		args = append(args, "--standin")
	}
	for _, g := range ex.Given {
		switch g {
		case "sbx":
			args = append(args, "--given", g)
		case "my_agents": // every example's directory holds it
		default:
			t.Fatalf("%s: the test cannot give %q (it gives sbx and my_agents)", ex, g)
		}
	}
	cmd := exec.CommandContext(timeout(t), pyenv, args...)
	cmd.Dir, cmd.Env = dir, env
	return run(t, ex, cmd)
}
