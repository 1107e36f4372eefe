package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// sandboxVerbs are the verbs of "withruntime sandbox".
func (a *App) sandboxVerbs() []leaf {
	one := func(verb, short, about string, call func(ctx context.Context, c *client.Client, id string) (*api.Sandbox, error)) leaf {
		return leaf{use: verb + " [--json] ID", short: short, about: about,
			define: func(c *command, s streams) runFunc { return a.sandboxOne(c, s, verb, call) }}
	}
	return []leaf{
		{use: "run [flags] -- CMD [ARG...]", short: "create a sandbox, run CMD in it, stop it", about: runAbout, raw: true, define: a.sandboxRun},
		{use: "create [flags]", short: "create a sandbox and print its id",
			about: "Creates a sandbox and prints its id. It runs until its lease ends or \"withruntime sandbox stop ID\".", define: a.sandboxCreate},
		{use: "exec ID [flags] -- CMD [ARG...]", short: "run CMD in a running sandbox", about: execAbout, raw: true, define: a.sandboxExec},
		{use: "shell ID [flags]", short: "an interactive shell in a running sandbox, like docker exec -it ID sh", about: shellAbout, define: a.sandboxShell},
		{use: "ls [-a] [--state S,...] [--metadata KEY=VALUE]... [--json]", short: "list live sandboxes (-a: also those ended in the last 24 hours)", aliases: []string{"list"},
			about: lsAbout, define: a.sandboxList},
		one("get", "show one sandbox", "Shows one sandbox.",
			func(ctx context.Context, c *client.Client, id string) (*api.Sandbox, error) {
				return c.GetSandbox(ctx, id)
			}),
		{use: "stop [--json] ID...", short: "stop sandboxes (removes paused ones); also: rm", aliases: []string{"rm"},
			about: "Stops sandboxes; a paused one is removed with its checkpoint. Prints each id stopped.", define: a.sandboxRemove},
		one("pause", "checkpoint a sandbox, freeing its memory and CPU", "Checkpoints a sandbox (disk, memory and processes) and frees its memory and CPU.",
			func(ctx context.Context, c *client.Client, id string) (*api.Sandbox, error) {
				return c.PauseSandbox(ctx, id)
			}),
		one("resume", "bring a paused sandbox back", "Brings a paused sandbox back to running.",
			func(ctx context.Context, c *client.Client, id string) (*api.Sandbox, error) {
				return c.ResumeSandbox(ctx, id)
			}),
		{use: "extend [--json] ID --timeout D", short: "make a running sandbox's lease last at least D from now", about: extendAbout, define: a.sandboxExtend},
		{use: "egress [--json] ID", short: "allowed and refused connections of a sandbox",
			about: "Shows the connections and DNS queries of a sandbox that its network policy allowed or refused, oldest first.", define: a.sandboxEgress},
		{use: "network [--internet | --allow HOST... | --off] [--json] ID", short: "show or change the network of a live sandbox", about: networkAbout, define: a.sandboxNetwork},
		{use: "cp [flags] SRC DST", short: "copy files and directories to or from ID:PATH, like docker cp", about: cpAbout, define: a.sandboxCp},
	}
}

const extendAbout = `Makes the lease of a running sandbox last at least D from now (seconds, or a
duration such as 15m) and prints when it ends. It never shortens a lease: one
that already ends later is kept.`

// createFlags are the flags that shape a new sandbox (run and create).
type createFlags struct {
	timeout    durationValue
	vcpus      int
	memory     int
	disk       int
	env        mapValue
	metadata   mapValue
	allow      listValue
	internet   bool
	template   string
	image      string
	isolation  string
	onLeaseEnd string
	maxCost    *int64
	volumes    []api.VolumeMount
	trial      bool
	// autoResume: a paused sandbox resumes on its next use.
	autoResume bool
	snapshot   string
}

func (f *createFlags) register(fs *pflag.FlagSet) {
	f.env, f.metadata = mapValue{}, mapValue{}
	fs.Var(&f.timeout, "timeout", "the lease: `SECONDS` or a duration such as 15m (server default 300s)")
	fs.IntVar(&f.vcpus, "vcpus", 0, "`N` virtual CPUs (server default 2)")
	fs.IntVar(&f.memory, "memory", 0, "memory in `MiB` (server default 4096)")
	fs.Func("disk", "the root disk's writable layer in `GIB` (server default 10)", func(s string) error {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			return errors.New("want a positive integer")
		}
		f.disk = n
		return nil
	})
	fs.VarP(f.env, "env", "e", "set `KEY=VALUE` in the sandbox's environment (repeatable)")
	fs.Var(&f.allow, "allow", "let the sandbox reach `HOST` (exact or *.domain; repeatable) and no other; without it or --internet the network is off")
	fs.BoolVar(&f.internet, "internet", false, "turn the internet on with no allow list (with --allow: only those hosts)")
	fs.StringVar(&f.template, "template", "", "start from template `NAME[:TAG]` (default: the built-in image)")
	fs.StringVar(&f.snapshot, "snapshot", "", "start from snapshot `ID`: its processes, memory and disk (its template, vCPUs and memory too)")
	fs.StringVar(&f.image, "image", "", "the same as --template `NAME[:TAG]` (its older name)")
	fs.Func("isolation", "the sandbox's boundary: `gvisor|microvm` (microvm: its own Linux kernel; server default: serve --isolation)", func(s string) error {
		if s != "gvisor" && s != "microvm" {
			return errors.New("want gvisor or microvm")
		}
		f.isolation = s
		return nil
	})
	fs.Func("on-lease-end", "what the end of the lease does: `stop|pause` (server default stop)", func(s string) error {
		if s != "stop" && s != "pause" {
			return errors.New("want stop or pause")
		}
		f.onLeaseEnd = s
		return nil
	})
	fs.Var(f.metadata, "metadata", "attach `KEY=VALUE` to the sandbox (repeatable)")
	fs.Func("max-cost", "refuse the create if its first lease could cost more than `MICROS` (USD millionths)", func(s string) error {
		var n int64
		if _, err := fmt.Sscan(s, &n); err != nil || n < 0 {
			return errors.New("want a non-negative integer")
		}
		f.maxCost = &n
		return nil
	})
	fs.Func("volume", "mount volume `NAME:/PATH[:ro]` (repeatable; volume create makes one)", func(s string) error {
		name, rest, ok := strings.Cut(s, ":")
		if !ok || name == "" || !strings.HasPrefix(rest, "/") {
			return errors.New("want NAME:/PATH or NAME:/PATH:ro")
		}
		m := api.VolumeMount{Name: name, Path: rest}
		if p, ok := strings.CutSuffix(rest, ":ro"); ok {
			m.Path, m.ReadOnly = p, true
		}
		f.volumes = append(f.volumes, m)
		return nil
	})
	fs.BoolVar(&f.trial, "trial", false, trialCreateHelp)
	fs.BoolVar(&f.autoResume, "auto-resume", false, "once paused (by --on-lease-end pause or a pause), resume on the next exec, file, code, preview or port-forward call")
}

func (f *createFlags) request() api.CreateSandboxRequest {
	req := api.CreateSandboxRequest{
		Isolation:      f.isolation,
		Template:       f.template,
		Image:          f.image,
		VCPUs:          f.vcpus,
		MemoryMiB:      f.memory,
		TimeoutSeconds: f.timeout.seconds(),
		OnLeaseEnd:     f.onLeaseEnd,
		MaxCostMicros:  f.maxCost,
		AutoResume:     f.autoResume,
		Snapshot:       f.snapshot,
	}
	if f.disk > 0 {
		req.DiskGiB = &f.disk
	}
	req.Volumes = f.volumes
	if len(f.env) > 0 {
		req.Env = f.env
	}
	if len(f.metadata) > 0 {
		req.Metadata = f.metadata
	}
	if f.internet || len(f.allow) > 0 {
		req.Network = &api.Network{Internet: true, Allow: f.allow}
	}
	return req
}

func (a *App) sandboxCreate(cmd *command, s streams) runFunc {
	var cf createFlags
	cf.register(cmd.fs)
	asJSON := cmd.fs.Bool("json", false, "print the sandbox as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) > 0 {
			return cmd.usageError(s, "unexpected argument %q", pos[0])
		}
		_, sbx, done, err := a.createSandbox(ctx, s, &cf)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		if *asJSON {
			return printJSON(s, sbx)
		}
		fmt.Fprintln(s.stdout, sbx.ID)
		return exitOK
	}
}

const lsAbout = `Lists the sandboxes of the key's account, newest first: by default the live
ones (starting, running or paused), as docker ps does; with -a (--all) also
those that ended in the last 24 hours. --state lists the states named, the
ended ones of the last 24 hours included when it names ended.`

// liveStates are the states "sandbox ls" lists without --all or --state.
var liveStates = []string{"starting", "running", "paused"}

func (a *App) sandboxList(cmd *command, s streams) runFunc {
	var o client.ListOptions
	all := cmd.fs.BoolP("all", "a", false, "also the sandboxes that ended in the last 24 hours")
	cmd.fs.Func("state", "only these `STATES`, comma-separated (starting, running, paused, ended)", func(v string) error {
		o.States = strings.Split(v, ",")
		return nil
	})
	md := mapValue{}
	cmd.fs.Var(md, "metadata", "only sandboxes with metadata `KEY=VALUE` (repeatable; all must match)")
	return runListing(a, s, listing[api.Sandbox]{
		cmd: cmd, trial: trialFlag(cmd.fs),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]api.Sandbox, error) {
			if len(md) > 0 {
				o.Metadata = md
			}
			// The server's default listing is this --all: the live ones
			// and those ended in the last 24 hours.
			if len(o.States) == 0 && !*all {
				o.States = liveStates
			}
			return c.ListSandboxesWith(ctx, o)
		},
		asJSON: func(l []api.Sandbox) any { return api.SandboxList{Sandboxes: l} },
		header: "ID\tSTATE\tVCPUS\tMEMORY\tLEASE-ENDS\tEND-REASON\tCOST-USD",
		row: func(sb api.Sandbox) string {
			lease := "-"
			if sb.State != "ended" && !sb.LeaseEndsAt.IsZero() {
				lease = sb.LeaseEndsAt.Local().Format(time.RFC3339)
			}
			return fmt.Sprintf("%s\t%s\t%d\t%dMiB\t%s\t%s\t%s", sb.ID, sb.State, sb.VCPUs, sb.MemoryMiB, lease, dash(sb.EndReason), formatUSD(sb.CostMicros))
		},
	})
}

// sandboxOne runs a command that takes one sandbox ID and answers with the
// sandbox: get, pause, resume.
func (a *App) sandboxOne(cmd *command, s streams, verb string,
	call func(context.Context, *client.Client, string) (*api.Sandbox, error)) runFunc {
	asJSON := cmd.fs.Bool("json", false, "print the sandbox as JSON")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return cmd.usageError(s, "want one sandbox ID, got %d arguments", len(pos))
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		sbx, err := call(ctx, c, pos[0])
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		switch {
		case *asJSON:
			return printJSON(s, sbx)
		case verb == "get":
			printSandbox(s.stdout, sbx)
		default:
			fmt.Fprintln(s.stdout, sbx.ID)
		}
		return exitOK
	}
}

func (a *App) sandboxExtend(cmd *command, s streams) runFunc {
	var timeout durationValue
	cmd.fs.Var(&timeout, "timeout", "the least time the lease lasts from now: `SECONDS` or a duration such as 15m")
	asJSON := cmd.fs.Bool("json", false, "print the sandbox as JSON")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return cmd.usageError(s, "want one sandbox ID, got %d arguments", len(pos))
		}
		if timeout.d == 0 {
			return cmd.usageError(s, "no --timeout given")
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		sbx, err := c.ExtendSandbox(ctx, pos[0], timeout.seconds())
		if err != nil {
			report(s.stderr, timeout.refusal("--timeout", err))
			return exitFailure
		}
		if *asJSON {
			return printJSON(s, sbx)
		}
		fmt.Fprintf(s.stdout, "%s\tlease ends %s\n", sbx.ID, timeString(&sbx.LeaseEndsAt))
		return exitOK
	}
}

func (a *App) sandboxRemove(cmd *command, s streams) runFunc {
	asJSON := cmd.fs.Bool("json", false, "print the stopped sandboxes as JSON")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return cmd.usageError(s, "want at least one sandbox ID")
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		status := exitOK
		stopped := []api.Sandbox{}
		for _, id := range pos {
			sbx, err := c.StopSandbox(ctx, id)
			if err != nil {
				report(s.stderr, err)
				status = exitFailure
				continue
			}
			stopped = append(stopped, *sbx)
			if !*asJSON {
				fmt.Fprintln(s.stdout, sbx.ID)
			}
		}
		if *asJSON {
			if code := printJSON(s, api.SandboxList{Sandboxes: stopped}); code != exitOK {
				return code
			}
		}
		return status
	}
}

// printJSON prints v as indented JSON.
func printJSON(s streams, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		report(s.stderr, err)
		return exitFailure
	}
	b = append(b, '\n')
	if _, err := s.stdout.Write(b); err != nil {
		return exitFailure
	}
	return exitOK
}

func printSandbox(w io.Writer, sb *api.Sandbox) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", sb.ID)
	row("State", sb.State)
	row("Isolation", dash(sb.Isolation))
	template := sb.Template
	if template == "" {
		template = sb.Image // a server older than templates
	}
	row("Template", dash(template))
	row("vCPUs", fmt.Sprint(sb.VCPUs))
	row("Memory", fmt.Sprintf("%d MiB", sb.MemoryMiB))
	net := "off"
	if sb.Network.Internet {
		net = "internet"
		if len(sb.Network.Allow) > 0 {
			net += ", only " + strings.Join(sb.Network.Allow, " ")
		}
	}
	row("Network", net)
	row("On lease end", dash(sb.OnLeaseEnd))
	if sb.AutoResume {
		row("Auto-resume", "on")
	}
	row("Created", timeString(&sb.CreatedAt))
	row("Lease ends", timeString(&sb.LeaseEndsAt))
	if sb.PausedAt != nil {
		row("Paused", timeString(sb.PausedAt))
	}
	if sb.RetentionEndsAt != nil {
		row("Kept until", timeString(sb.RetentionEndsAt))
	}
	if sb.EndedAt != nil {
		row("Ended", timeString(sb.EndedAt))
	}
	if sb.EndReason != "" {
		reason := sb.EndReason
		if sb.EndMessage != "" {
			reason += ": " + sb.EndMessage
		}
		row("End reason", reason)
	}
	cost := formatUSD(sb.CostMicros) + " USD"
	if sb.State != "ended" {
		cost += " so far"
	}
	row("Cost", cost)
	row("Usage", fmt.Sprintf("%s s running, %s CPU-s, %s GiB-s of memory",
		formatAmount(sb.Usage.Seconds, 1), formatAmount(sb.Usage.CPUSeconds, 1), formatAmount(sb.Usage.MemoryGiBSeconds, 1)))
	if len(sb.Metadata) > 0 {
		keys := make([]string, 0, len(sb.Metadata))
		for k := range sb.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			row("Metadata", k+"="+sb.Metadata[k])
		}
	}
	tw.Flush()
}

// trialCreateHelp is the help of --trial where a sandbox is created.
const trialCreateHelp = "on a server, use the trial key stored for it, obtaining one the first time (nothing changes when WITHRUNTIME_API_KEY is set, or with the local daemon's admin key)"

// trialFlag registers --trial for commands that use a trial key but never
// obtain one.
func trialFlag(fs *pflag.FlagSet) *bool {
	return fs.Bool("trial", false, "on a server, use the trial key stored for it by \"sandbox run|create --trial\" (nothing changes when WITHRUNTIME_API_KEY is set, or with the local daemon's admin key)")
}

func timeString(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
