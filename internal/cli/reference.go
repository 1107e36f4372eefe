package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Reference returns the command line's reference in Markdown: every
// command's help, as --help prints it, generated from the tree (docs/CLI.md
// is this, checked by a test of cmd/withruntime).
func (a *App) Reference() string {
	var b bytes.Buffer
	root := a.tree(streams{stdout: io.Discard, stderr: io.Discard})
	root.InitDefaultCompletionCmd()
	fmt.Fprint(&b, "# withruntime command line reference\n\n")
	fmt.Fprint(&b, "Generated from the command tree (internal/cli) by\n"+
		"`go test ./cmd/withruntime -run TestCLIReference -update`; that test fails when\n"+
		"this file is stale. `withruntime COMMAND --help` prints the same text.\n")
	walk(root, func(c *cobra.Command) {
		var h bytes.Buffer
		c.SetOut(&h)
		c.HelpFunc()(c, nil)
		fmt.Fprintf(&b, "\n## %s\n\n```text\n%s```\n", c.CommandPath(), strings.TrimRight(h.String(), "\n")+"\n")
	})
	return b.String()
}

// walk calls f on c and every command below it that a user may run,
// depth first in the order help lists them.
func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			walk(sub, f)
		}
	}
}
