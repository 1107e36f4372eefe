package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/cli"
)

// Where sandboxes cannot run (macOS, Windows) the binary is a client only,
// but its command tree is the Linux one: serve and setup keep their flags
// and help (hostflags.go records them, a Linux test keeps the record
// fresh), so docs/CLI.md holds everywhere; running them says what to do
// instead. These live outside build tags so that Linux CI tests them.

// hostlessHooks are serve and setup that refuse, on stderr, and no local
// daemon, with the reason a command that finds no server prints.
func hostlessHooks(stderr io.Writer) cli.Hooks {
	return cli.Hooks{
		Serve:    hostOnly("serve", serveFlags, stderr),
		Setup:    hostOnly("setup", setupFlags, stderr),
		Node:     hostOnly("node", nodeFlags, stderr),
		NoDaemon: needsLinux("the local daemon"),
	}
}

// needsLinux says what needs a Linux host and how to work without one.
func needsLinux(what string) string {
	return fmt.Sprintf("%s needs a Linux host; on this machine point the CLI at a server with %s (and %s)",
		what, client.EnvBaseURL, client.EnvAPIKey)
}

// hostOnly is the command name with the flags specs, which any run fails
// with not_supported (exit 1).
func hostOnly(name string, specs []flagSpec, stderr io.Writer) cli.Hook {
	return func(fs *pflag.FlagSet) func([]string) int {
		for _, s := range specs {
			s.define(fs)
		}
		return func([]string) int {
			fmt.Fprintf(stderr, "error: %s: %s\n", client.CodeNotSupported, needsLinux("withruntime "+name))
			return 1
		}
	}
}

// flagSpec is a flag as help shows it and the parser needs it.
type flagSpec struct {
	Name, Shorthand, Usage string
	Type                   string // the value's pflag type name: "string", "duration", "func"...
	DefValue, NoOptDefVal  string
	Hidden                 bool
}

func (s flagSpec) define(fs *pflag.FlagSet) {
	fs.VarP(&specValue{typ: s.Type, val: s.DefValue}, s.Name, s.Shorthand, s.Usage)
	f := fs.Lookup(s.Name)
	f.NoOptDefVal, f.Hidden = s.NoOptDefVal, s.Hidden
}

// specValue takes any value: a command that only refuses checks none.
type specValue struct{ typ, val string }

func (v *specValue) String() string     { return v.val }
func (v *specValue) Set(s string) error { v.val = s; return nil }
func (v *specValue) Type() string       { return v.typ }
