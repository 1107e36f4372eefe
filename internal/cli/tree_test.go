package cli

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// treeApp is an App whose hooks define a flag, as serve, setup and node do.
func treeApp() *App {
	hook := func(fs *pflag.FlagSet) func([]string) int {
		fs.String("data-dir", "", "a `DIR`")
		return func([]string) int { return exitFailure }
	}
	return &App{Hooks: Hooks{Serve: hook, Setup: hook, Node: hook}}
}

// paths returns the path of every command of the tree below the program,
// "sandbox run" for withruntime sandbox run.
func paths(t *testing.T, a *App) map[string]*cobra.Command {
	t.Helper()
	root := a.tree(streams{stdout: io.Discard, stderr: io.Discard})
	root.InitDefaultCompletionCmd()
	got := map[string]*cobra.Command{}
	walk(root, func(c *cobra.Command) {
		got[strings.TrimPrefix(c.CommandPath(), "withruntime")] = c
	})
	return got
}

// Every noun and verb of SPEC.md is in the tree, with a line for the
// lists, and its own --help: its usage line on stdout and exit 0, nothing
// sent to a server (WITHRUNTIME_BASE_URL points nowhere).
func TestTreeHelp(t *testing.T) {
	t.Setenv("WITHRUNTIME_BASE_URL", "http://127.0.0.1:1")
	a := treeApp()
	tree := paths(t, a)
	want := []string{
		"", " sandbox", " sandbox run", " sandbox create", " sandbox ls", " sandbox exec", " sandbox stop",
		" sandbox pause", " sandbox resume", " sandbox extend", " sandbox cp", " sandbox egress", " sandbox get", " sandbox ps", " sandbox logs", " sandbox kill", " sandbox snapshot", " sandbox fork",
		" snapshot", " snapshot ls", " snapshot get", " snapshot rm",
		" template", " template import", " template ls", " template get", " template rm",
		" secrets", " secrets set", " secrets ls", " secrets rm", " keys", " keys create", " keys ls", " keys rm",
		" accounts", " accounts create", " accounts ls", " usage", " setup", " serve", " node", " daemon", " daemon status",
		" daemon stop", " mcp", " version", " completion", " completion bash", " completion zsh", " completion fish",
	}
	for _, p := range want {
		if tree[p] == nil {
			t.Errorf("withruntime%s: not in the tree", p)
		}
	}
	for p, c := range tree {
		t.Run("withruntime"+p, func(t *testing.T) {
			if c.Short == "" {
				t.Errorf("no Short")
			}
			args := append(strings.Fields(p), "--help")
			code, stdout, stderr := run(t, a, args...)
			wantStart := "usage: withruntime" + p
			if p == "" {
				wantStart = "usage: withruntime COMMAND"
			}
			if code != exitOK || !strings.HasPrefix(stdout, wantStart) || stderr != "" {
				t.Errorf("--help: got exit %d stdout %.80q stderr %q, want 0 and stdout starting %q", code, stdout, stderr, wantStart)
			}
			if c.HasAvailableSubCommands() {
				for _, sub := range c.Commands() {
					if sub.IsAvailableCommand() && !strings.Contains(stdout, "\n  "+sub.Name()+" ") {
						t.Errorf("--help does not list %q: %q", sub.Name(), stdout)
					}
				}
			}
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Name != "help" && !f.Hidden && !strings.Contains(stdout, "--"+f.Name) {
					t.Errorf("--help does not show --%s", f.Name)
				}
			})
		})
	}
}

// The program's overview (hand-written, grouped) names every verb.
func TestOverviewListsEveryVerb(t *testing.T) {
	for p, c := range paths(t, treeApp()) {
		if c.HasAvailableSubCommands() || strings.HasPrefix(p, " completion ") || p == "" {
			continue
		}
		if !strings.Contains(usage, "\n  "+strings.TrimPrefix(p, " ")) {
			t.Errorf("the overview (usage in cli.go) does not list %q", strings.TrimPrefix(p, " "))
		}
	}
}

// Flag errors are usage errors: the flag package's message after the
// command's name, the usage line and a pointer to --help, exit 2.
func TestFlagErrors(t *testing.T) {
	t.Setenv("WITHRUNTIME_BASE_URL", "http://127.0.0.1:1")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "ls", "--bogus"}, "sandbox ls: unknown flag: --bogus\n"},
		{[]string{"sandbox", "run", "--bogus", "--", "true"}, "sandbox run: unknown flag: --bogus\n"},
		{[]string{"sandbox", "exec", "sbx_a", "--bogus", "--", "true"}, "sandbox exec: unknown flag: --bogus\n"},
		{[]string{"keys", "create", "--read-only=maybe"}, "keys create: invalid argument \"maybe\" for \"--read-only\" flag"},
		{[]string{"sandbox", "create", "--vcpus"}, "sandbox create: flag needs an argument: --vcpus\n"},
		{[]string{"--bogus"}, "withruntime: unknown flag: --bogus\n"},
		{[]string{"serve", "--bogus"}, "serve: unknown flag: --bogus\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, treeApp(), tt.args...)
			if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, tt.want) || !strings.Contains(stderr, "--help\" lists") {
				t.Errorf("got exit %d stdout %q stderr %q, want 2, nothing and %q with a pointer to --help", code, stdout, stderr, tt.want)
			}
		})
	}
}

// After "--" (and, for run and exec, after the first argument that is not
// a flag) everything belongs to the command, flags too.
func TestCommandArgsKeepTheirFlags(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	for _, args := range [][]string{
		{"sandbox", "exec", "sbx_a", "--cwd", "/", "--", "ls", "--json", "-l"},
		{"sandbox", "exec", "sbx_a", "ls", "--json", "-l"},
	} {
		if code, _, stderr := run(t, nil, args...); code != 0 {
			t.Fatalf("%v: got exit %d stderr %q", args, code, stderr)
		}
	}
	_, execs, _ := f.snapshot()
	want := []string{"ls", "--json", "-l"}
	if len(execs) != 2 {
		t.Fatalf("got %d execs, want 2", len(execs))
	}
	for _, e := range execs {
		if !slices.Equal(e.Cmd.Argv, want) {
			t.Errorf("argv: got %q, want %q", e.Cmd.Argv, want)
		}
	}
}

// Completion comes from the tree: scripts for the shells, and the verbs
// and flags a shell asks for.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if code, stdout, _ := run(t, nil, "completion", shell); code != 0 || !strings.Contains(stdout, "withruntime") {
			t.Errorf("completion %s: got exit %d, %d bytes", shell, code, len(stdout))
		}
	}
	_, stdout, _ := run(t, nil, "__complete", "sandbox", "r")
	for _, verb := range []string{"run\t", "resume\t"} {
		if !strings.Contains(stdout, verb) {
			t.Errorf("completing \"sandbox r\": got %q, want %q in it", stdout, verb)
		}
	}
	_, stdout, _ = run(t, nil, "__complete", "sandbox", "st")
	if !strings.Contains(stdout, "stop\t") {
		t.Errorf("completing \"sandbox st\": got %q, want stop in it", stdout)
	}
	_, stdout, _ = run(t, nil, "__complete", "keys", "create", "--daily")
	if !strings.Contains(stdout, "--daily-limit-usd\t") {
		t.Errorf("completing \"keys create --daily\": got %q", stdout)
	}
}
