package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// snapshotVerbs are the verbs of "withruntime snapshot".
func (a *App) snapshotVerbs() []leaf {
	return []leaf{
		{use: "ls [--json]", short: "list the account's snapshots, newest first", aliases: []string{"list"},
			about: "Lists the snapshots of the key's account, newest first: each one's id, label, sandbox, size and when retention removes it.", define: a.snapshotList},
		{use: "get [--json] ID", short: "show one snapshot",
			about: "Shows one snapshot: the sandbox it was taken of, its template, size, and when retention removes it.", define: a.snapshotGet},
		{use: "rm [--json] ID...", short: "remove snapshots", aliases: []string{"delete"},
			about: "Removes snapshots; sandboxes started from them run on. Prints each id removed.", define: a.snapshotRemove},
	}
}

const sandboxSnapshotAbout = `Without -t, saves a running sandbox whole: its memory, processes and disk.
The sandbox keeps running (it stops answering for the freeze the result
shows). Prints the snapshot's id; "withruntime sandbox create --snapshot ID"
starts sandboxes from it, each going on from where the sandbox was.

With -t NAME[:TAG] (tag latest when left out), makes a template from the
file system of the sandbox as it is now: what its commands installed and
wrote; what its processes hold in memory is not kept. Prints the template's
NAME:TAG and id. A sandbox starts from it with
"withruntime sandbox create --template NAME".`

// sandboxSnapshotLeaf is "withruntime sandbox snapshot".
func (a *App) sandboxSnapshotLeaf() leaf {
	return leaf{use: "snapshot ID [--name LABEL | -t NAME[:TAG]] [--json]", short: "save a running sandbox's memory and disk (-t: a template of its files)",
		about: sandboxSnapshotAbout, define: a.sandboxSnapshot}
}

func (a *App) sandboxSnapshot(cmd *command, s streams) runFunc {
	template := cmd.fs.StringP("template", "t", "", "make template `NAME[:TAG]` of the file system instead (tag latest when left out)")
	label := cmd.fs.String("name", "", "label the snapshot `LABEL` (at most 128 bytes)")
	asJSON := cmd.fs.Bool("json", false, "print the snapshot (or template) as JSON")
	return a.onClient(s, trialFlag(cmd.fs), func(pos []string) int {
		if *template != "" && *label != "" {
			return cmd.usageError(s, "--name labels a snapshot, -t makes a template: give one")
		}
		return oneArg(cmd, s, pos, "sandbox ID")
	}, func(ctx context.Context, c *client.Client, pos []string) (int, error) {
		if *template != "" {
			t, err := c.Snapshot(ctx, pos[0], *template)
			if err != nil {
				return exitFailure, err
			}
			return printTemplateMade(s, t, *asJSON), nil
		}
		sn, err := c.CreateSnapshot(ctx, pos[0], *label)
		if err != nil {
			return exitFailure, err
		}
		return printOr(s, *asJSON, sn, func(w io.Writer) { fmt.Fprintln(w, sn.ID) }), nil
	})
}

// onClient is what runs a verb: once check passes the positional
// arguments (exitOK, else a usage error's code), it connects as --trial
// says and runs call; the error call returns is reported, exit 1.
func (a *App) onClient(s streams, trial *bool, check func(pos []string) int, call func(ctx context.Context, c *client.Client, pos []string) (int, error)) runFunc {
	return func(ctx context.Context, pos []string) int {
		if code := check(pos); code != exitOK {
			return code
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		code, err := call(ctx, c, pos)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		return code
	}
}

// oneArg checks that pos is one argument, what.
func oneArg(cmd *command, s streams, pos []string, what string) int {
	if len(pos) != 1 {
		return cmd.usageError(s, "want one %s, got %d arguments", what, len(pos))
	}
	return exitOK
}

// printOr prints v as JSON when asJSON, else as text does.
func printOr(s streams, asJSON bool, v any, text func(io.Writer)) int {
	if asJSON {
		return printJSON(s, v)
	}
	text(s.stdout)
	return exitOK
}

const forkAbout = `Starts N sandboxes (1 to 16, default 1) from a snapshot of a running sandbox
taken now: each goes on from where the sandbox was, with its processes and
memory, and has its own address, disk, boot id and kernel randomness from
then on. The sandbox itself runs on. All or none: a count past the
account's concurrency starts nothing. The snapshot is removed once they
run, unless --keep-snapshot (its id is then printed on stderr). Prints the
new sandboxes' ids, one a line.`

func (a *App) sandboxForkLeaf() leaf {
	return leaf{use: "fork ID [-n N] [--keep-snapshot] [--json]", short: "start N sandboxes that go on from where a running sandbox is",
		about: forkAbout, define: a.sandboxFork}
}

func (a *App) sandboxFork(cmd *command, s streams) runFunc {
	n := cmd.fs.IntP("count", "n", 1, "start `N` sandboxes (1 to 16)")
	keep := cmd.fs.Bool("keep-snapshot", false, "keep the snapshot they start from (\"withruntime snapshot rm\" removes it)")
	asJSON := cmd.fs.Bool("json", false, "print the result as JSON: {\"sandboxes\": [...], \"snapshot\": ...}")
	return a.onClient(s, trialFlag(cmd.fs), func(pos []string) int {
		return oneArg(cmd, s, pos, "sandbox ID")
	}, func(ctx context.Context, c *client.Client, pos []string) (int, error) {
		// The API reads a count of 0 as 1; the server says what else it
		// refuses.
		if *n < 1 {
			return exitFailure, &cliError{client.CodeInvalidRequest, fmt.Sprintf("-n %d: want 1 to 16 sandboxes", *n)}
		}
		res, err := c.Fork(ctx, pos[0], *n, *keep)
		if err != nil {
			return exitFailure, err
		}
		return printOr(s, *asJSON, res, func(w io.Writer) {
			for _, sb := range res.Sandboxes {
				fmt.Fprintln(w, sb.ID)
			}
			if res.Snapshot != nil {
				fmt.Fprintf(s.stderr, "withruntime: kept snapshot %s\n", res.Snapshot.ID)
			}
		}), nil
	})
}

func (a *App) snapshotList(cmd *command, s streams) runFunc {
	return runListing(a, s, listing[api.Snapshot]{
		cmd: cmd, trial: trialFlag(cmd.fs),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]api.Snapshot, error) {
			return c.ListSnapshots(ctx)
		},
		asJSON: func(l []api.Snapshot) any { return api.SnapshotList{Snapshots: l} },
		header: "ID\tNAME\tSANDBOX\tSIZE\tCREATED\tEXPIRES",
		row: func(sn api.Snapshot) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", sn.ID, dash(sn.Name), sn.SandboxID, formatBytes(sn.SizeBytes), timeString(&sn.CreatedAt), timeString(&sn.ExpiresAt))
		},
	})
}

func (a *App) snapshotGet(cmd *command, s streams) runFunc {
	asJSON := cmd.fs.Bool("json", false, "print the snapshot as JSON")
	return a.onClient(s, trialFlag(cmd.fs), func(pos []string) int {
		return oneArg(cmd, s, pos, "snapshot ID")
	}, func(ctx context.Context, c *client.Client, pos []string) (int, error) {
		sn, err := c.GetSnapshot(ctx, pos[0])
		if err != nil {
			return exitFailure, err
		}
		return printOr(s, *asJSON, sn, func(w io.Writer) { printSnapshot(w, sn) }), nil
	})
}

func (a *App) snapshotRemove(cmd *command, s streams) runFunc {
	asJSON := cmd.fs.Bool("json", false, "print the removed ids as JSON: {\"removed\": [...]}")
	return a.onClient(s, trialFlag(cmd.fs), func(pos []string) int {
		if len(pos) == 0 {
			return cmd.usageError(s, "want at least one snapshot ID")
		}
		return exitOK
	}, func(ctx context.Context, c *client.Client, pos []string) (int, error) {
		status := exitOK
		removed := []string{}
		for _, id := range pos {
			// Each failure is reported and the others still go.
			if err := c.DeleteSnapshot(ctx, id); err != nil {
				report(s.stderr, err)
				status = exitFailure
				continue
			}
			removed = append(removed, id)
		}
		if code := printOr(s, *asJSON, map[string][]string{"removed": removed}, func(w io.Writer) {
			for _, id := range removed {
				fmt.Fprintln(w, id)
			}
		}); code != exitOK {
			return code, nil
		}
		return status, nil
	})
}

func printSnapshot(w io.Writer, sn *api.Snapshot) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", sn.ID)
	row("Name", dash(sn.Name))
	row("Sandbox", sn.SandboxID)
	row("Isolation", dash(sn.Isolation))
	row("Template", dash(sn.Template))
	row("vCPUs", strconv.Itoa(sn.VCPUs))
	row("Memory", fmt.Sprintf("%d MiB", sn.MemoryMiB))
	row("Size", formatBytes(sn.SizeBytes))
	row("Freeze", fmt.Sprintf("%d ms", sn.FreezeMs))
	row("Created", timeString(&sn.CreatedAt))
	row("Expires", timeString(&sn.ExpiresAt))
	tw.Flush()
}
