package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/withruntime/withruntime/client"
)

// listing is a command that shows one list, as a table or with --json as
// the API's object.
type listing[T any] struct {
	cmd *command
	// ids is how many sandbox ids the command takes: 0 or 1.
	ids int
	// trial, when set, is the command's --trial flag.
	trial  *bool
	fetch  func(ctx context.Context, c *client.Client, ids []string) ([]T, error)
	asJSON func([]T) any
	header string
	row    func(T) string // tab-separated cells
}

// runListing registers --json and returns what fetches the list and
// prints it.
func runListing[T any](a *App, s streams, l listing[T]) runFunc {
	asJSON := l.cmd.fs.Bool("json", false, "print the result as JSON")
	return func(ctx context.Context, pos []string) int {
		switch {
		case l.ids == 0 && len(pos) > 0:
			return l.cmd.usageError(s, "unexpected argument %q", pos[0])
		case l.ids == 1 && len(pos) != 1:
			return l.cmd.usageError(s, "want one sandbox ID, got %d arguments", len(pos))
		}
		var c *client.Client
		var done func()
		var err error
		if l.trial != nil {
			c, done, _, err = a.connectTrial(ctx, s, *l.trial, false)
		} else {
			c, done, err = a.connect(ctx)
		}
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		list, err := l.fetch(ctx, c, pos)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			if list == nil {
				list = []T{}
			}
			return printJSON(s, l.asJSON(list))
		}
		tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, l.header)
		for _, item := range list {
			fmt.Fprintln(tw, l.row(item))
		}
		tw.Flush()
		return exitOK
	}
}
