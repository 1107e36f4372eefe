package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/withruntime/withruntime/api"
)

// egressTime shows an event's time to the millisecond: a program's
// connections come many to the second.
const egressTime = "2006-01-02T15:04:05.000Z07:00"

func (a *App) sandboxEgress(ctx context.Context, s streams, args []string) int {
	cmd := newCommand("sandbox egress", "withruntime sandbox egress [--json] ID",
		"Shows the connections and DNS queries of a sandbox that its network policy allowed or refused, oldest first.", s)
	asJSON := cmd.fs.Bool("json", false, "print the log as JSON")
	trial := trialFlag(cmd.fs)
	pos, ok, code := cmd.parseInterspersed(s, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return cmd.usageError(s, "want one sandbox ID, got %d arguments", len(pos))
	}
	c, done, _, err := a.connectTrial(ctx, s, *trial, false)
	if err != nil {
		report(s.stderr, err)
		return exitFailure
	}
	defer done()
	events, err := c.Egress(ctx, pos[0])
	if err != nil {
		report(s.stderr, err)
		return exitFailure
	}
	if *asJSON {
		if events == nil {
			events = []api.EgressEvent{}
		}
		return printJSON(s, api.EgressLog{Events: events})
	}
	tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKIND\tNAME\tADDRESS\tPORT\tVERDICT\tREASON")
	for _, ev := range events {
		port := "-"
		if ev.Port != 0 {
			port = strconv.Itoa(ev.Port)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.Time.Local().Format(egressTime), dash(ev.Kind),
			dash(ev.Name), dash(ev.Address), port, dash(ev.Verdict), dash(ev.Reason))
	}
	tw.Flush()
	return exitOK
}
