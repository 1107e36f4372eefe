package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command line is a tree of cobra commands: a noun (sandbox, keys,
// ...) holds its verbs, and each verb is a leaf that defines its flags and
// returns what runs it. Help, completion and flag errors come from cobra;
// errors and exit codes stay the project's (see cli.go).

// runFunc runs a verb with its positional arguments, its flags parsed. It
// returns the exit code.
type runFunc func(ctx context.Context, pos []string) int

// leaf is one verb.
type leaf struct {
	use     string // what follows the path: "run [flags] -- CMD [ARG...]"
	short   string // one line, for the lists
	about   string // the help's text; short when empty
	aliases []string
	// raw leaves parse their own flags, which stop at the first argument
	// that is not one: what follows is a command line (run, exec).
	raw bool
	// quiet leaves get no signal context: Ctrl-C ends them at once.
	quiet  bool
	define func(c *command, s streams) runFunc
}

// noun is a group of verbs.
type noun struct {
	name    string
	aliases []string
	short   string
	verbs   []leaf
}

// exitWith is the error a command returns to end with that code, having
// printed what it had to say.
type exitWith int

func (e exitWith) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func codeError(code int) error {
	if code == exitOK {
		return nil
	}
	return exitWith(code)
}

// nouns is the tree below the program.
func (a *App) nouns() []noun {
	return []noun{
		{name: "sandbox", aliases: []string{"sandboxes"}, short: "run commands in sandboxes and manage them", verbs: append(append(append(append(a.sandboxVerbs(), a.processVerbs()...), a.sandboxSnapshotLeaf(), a.sandboxForkLeaf()), a.previewVerbs()...), a.topVerbs()...)},
		{name: "template", aliases: []string{"templates"}, short: "templates: the file systems sandboxes start from", verbs: a.templateVerbs()},
		{name: "volume", aliases: []string{"volumes"}, short: "named persistent volumes that outlive sandboxes", verbs: a.volumeVerbs()},
		{name: "snapshot", aliases: []string{"snapshots"}, short: "snapshots: sandboxes saved whole, to start others from", verbs: a.snapshotVerbs()},
		{name: "secrets", aliases: []string{"secret"}, short: "secrets sent only to the hosts they are for", verbs: a.secretsVerbs()},
		{name: "accounts", aliases: []string{"account"}, short: "accounts (admin key)", verbs: a.accountsVerbs()},
		{name: "keys", aliases: []string{"key"}, short: "API keys", verbs: a.keysVerbs()},
		{name: "daemon", short: "the local daemon", verbs: a.daemonVerbs()},
		{name: "sdk", short: "print the commands that install the SDKs from your server", verbs: a.sdkVerbs()},
	}
}

// verbsAtTop are the leaves right below the program.
func (a *App) verbsAtTop() []leaf {
	return []leaf{
		a.usageLeaf(),
		hookLeaf("serve", "serve [flags]", "run the server (default address 127.0.0.1:7878)", a.Hooks.Serve),
		hookLeaf("setup", "setup [flags]", "prepare this machine to run sandboxes", a.Hooks.Setup),
		hookLeaf("node", "node [flags]", "run a node daemon: this machine's sandboxes for a many-host installation", a.Hooks.Node),
		a.mcpLeaf(),
		{use: "version", short: "print the version", quiet: true, define: func(c *command, s streams) runFunc {
			return func(_ context.Context, pos []string) int {
				if len(pos) > 0 {
					return c.usageError(s, "unexpected argument %q", pos[0])
				}
				fmt.Fprintln(s.stdout, "withruntime", a.version())
				return exitOK
			}
		}},
	}
}

// tree builds the command tree on the streams s.
func (a *App) tree(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "withruntime",
		Short:         "sandboxes for AI agents: run commands in gVisor sandboxes, on this machine or a server",
		Version:       a.version(),
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE:          groupRun(s),
	}
	root.SetVersionTemplate("withruntime {{.Version}}\n")
	root.SetHelpFunc(printHelp)
	// cobra prints the usage where a command is unknown to "help".
	root.SetUsageFunc(func(c *cobra.Command) error {
		printGroupUsageLine(c.ErrOrStderr(), c)
		return nil
	})
	root.SuggestionsMinimumDistance = 2
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitWith(flagError(s, c, err))
	})
	root.SetIn(s.stdin)
	root.SetOut(s.stdout)
	root.SetErr(s.stderr)
	for _, n := range a.nouns() {
		g := &cobra.Command{
			Use:     n.name + " COMMAND [ARGS]",
			Short:   n.short,
			Aliases: n.aliases,
			Args:    cobra.ArbitraryArgs,
			RunE:    groupRun(s),

			SuggestionsMinimumDistance: 2,
		}
		for _, l := range n.verbs {
			g.AddCommand(l.command(s))
		}
		root.AddCommand(g)
	}
	for _, l := range a.verbsAtTop() {
		root.AddCommand(l.command(s))
	}
	return root
}

// command makes the cobra command of l.
func (l leaf) command(s streams) *cobra.Command {
	c := &cobra.Command{
		Use:                l.use,
		Short:              l.short,
		Long:               l.about,
		Aliases:            l.aliases,
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: l.raw,
	}
	run := l.define(&command{cobra: c, fs: c.Flags()}, s)
	c.RunE = func(_ *cobra.Command, pos []string) error {
		if l.quiet {
			return codeError(run(context.Background(), pos))
		}
		ctx, stop := signalContext()
		defer stop()
		return codeError(run(ctx, pos))
	}
	return c
}

// groupRun is what the program or a noun does without a verb: a usage
// error, or its help for "help".
func groupRun(s streams) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		name := (&command{cobra: c}).name()
		switch {
		case len(args) == 0:
			fmt.Fprintf(s.stderr, "%s: no command given\n", name)
		case args[0] == "help":
			c.HelpFunc()(c, args)
			return nil
		default:
			path := args[0]
			if c.HasParent() {
				path = name + " " + args[0]
			}
			return exitWith(printUnknownCommand(s, c, path, args[0]))
		}
		printGroupUsageLine(s.stderr, c)
		return exitWith(exitUsage)
	}
}

func printGroupUsageLine(w io.Writer, c *cobra.Command) {
	if !c.HasParent() {
		fmt.Fprint(w, usageLine)
		return
	}
	fmt.Fprintf(w, "usage: %s (\"%s --help\" lists the commands)\n", useLine(c), c.CommandPath())
}

// hookLeaf is serve or setup: hook defines the flags and runs it; without
// one the command fails with not_supported.
func hookLeaf(name, use, short string, hook Hook) leaf {
	l := leaf{use: use, short: short, quiet: true}
	if hook == nil {
		l.raw = true
		l.define = func(_ *command, s streams) runFunc {
			return func(context.Context, []string) int {
				printError(s.stderr, "not_supported", fmt.Sprintf("withruntime %s is not available in this build", name))
				return exitFailure
			}
		}
		return l
	}
	l.define = func(c *command, _ streams) runFunc {
		run := hook(c.fs)
		return func(_ context.Context, pos []string) int { return run(pos) }
	}
	return l
}

// printHelp prints a command's help: the program's is the overview in
// usage, a noun's lists its verbs, a verb's its flags.
func printHelp(c *cobra.Command, _ []string) {
	w := c.OutOrStdout()
	if !c.HasParent() {
		fmt.Fprint(w, usage)
		return
	}
	fmt.Fprintf(w, "usage: %s\n", useLine(c))
	about := c.Long
	if about == "" {
		about = c.Short
	}
	if about != "" {
		fmt.Fprintf(w, "\n%s\n", about)
	}
	if len(c.Aliases) > 0 {
		fmt.Fprintf(w, "\nalso: %s\n", strings.Join(c.Aliases, ", "))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintln(w, "\ncommands:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(tw, "  %s\t%s\n", sub.Name(), sub.Short)
			}
		}
		tw.Flush()
		fmt.Fprintf(w, "\n\"%s COMMAND --help\" shows a command's flags.\n", c.CommandPath())
	}
	printFlags(w, c.Flags())
}

// Hook is a command that lives outside this package (serve, setup): it
// registers its flags on fs and returns what runs it with the positional
// arguments, returning the exit code.
type Hook func(fs *pflag.FlagSet) func(args []string) int

// execute runs the tree on args and returns the exit code.
func (a *App) execute(s streams, args []string) int {
	root := a.tree(s)
	// An unknown command is reported as one before its flags are parsed
	// ("withruntime create --isolation microvm": the command, not the flag).
	if path, group := unknownCommand(root, args); group != nil {
		word := path[strings.LastIndex(path, " ")+1:]
		return printUnknownCommand(s, group, path, word)
	}
	root.SetArgs(args)
	err := root.Execute()
	var code exitWith
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	}
	// cobra's own failures, as an unknown command to "help".
	fmt.Fprintf(s.stderr, "withruntime: %v\n%s", err, usageLine)
	return exitUsage
}
