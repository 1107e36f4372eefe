package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// egressTime shows an event's time to the millisecond: a program's
// connections come many to the second.
const egressTime = "2006-01-02T15:04:05.000Z07:00"

func (a *App) sandboxEgress(cmd *command, s streams) runFunc {
	return runListing(a, s, listing[api.EgressEvent]{
		cmd: cmd, ids: 1, trial: trialFlag(cmd.fs),
		fetch: func(ctx context.Context, c *client.Client, ids []string) ([]api.EgressEvent, error) {
			l, err := c.Egress(ctx, ids[0])
			if err == nil && len(l) == 0 {
				emptyEgressNote(ctx, s, c, ids[0])
			}
			return l, err
		},
		asJSON: func(l []api.EgressEvent) any { return api.EgressLog{Events: l} },
		header: "TIME\tKIND\tNAME\tADDRESS\tPORT\tVERDICT\tREASON",
		row: func(ev api.EgressEvent) string {
			port := "-"
			if ev.Port != 0 {
				port = strconv.Itoa(ev.Port)
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", ev.Time.Local().Format(egressTime), dash(ev.Kind),
				dash(ev.Name), dash(ev.Address), port, dash(ev.Verdict), dash(ev.Reason))
		},
	})
}
