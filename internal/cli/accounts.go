package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// accountsVerbs are the verbs of "withruntime accounts".
func (a *App) accountsVerbs() []leaf {
	return []leaf{
		{use: "create [--concurrency N] [--trial-hours H] [--json] NAME", short: "create an account (admin key)",
			about: "Creates an account (admin key only) and prints its id.", define: a.accountsCreate},
		{use: "ls [--json]", short: "list accounts (admin key)", aliases: []string{"list"},
			about: "Lists the accounts (admin key only).", define: a.accountsList},
	}
}

func (a *App) accountsCreate(cmd *command, s streams) runFunc {
	concurrency := cmd.fs.Int("concurrency", 0, "run at most `N` sandboxes at once (server default 100)")
	trialHours := cmd.fs.Float64("trial-hours", 0, "make it a trial account with `H` free sandbox hours")
	asJSON := cmd.fs.Bool("json", false, "print the account as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 || pos[0] == "" {
			return cmd.usageError(s, "want one account NAME, got %d arguments", len(pos))
		}
		if *concurrency < 0 {
			return cmd.usageError(s, "--concurrency must not be negative")
		}
		if !(*trialHours >= 0) { // NaN too
			return cmd.usageError(s, "--trial-hours must not be negative")
		}
		c, done, err := a.connect(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		acc, err := c.CreateAccount(ctx, api.CreateAccountRequest{Name: pos[0], Concurrency: *concurrency, TrialHours: *trialHours})
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			return printJSON(s, acc)
		}
		fmt.Fprintln(s.stdout, acc.ID)
		return exitOK
	}
}

func (a *App) accountsList(cmd *command, s streams) runFunc {
	return runListing(a, s, listing[api.Account]{
		cmd: cmd,
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]api.Account, error) {
			return c.ListAccounts(ctx)
		},
		asJSON: func(l []api.Account) any { return api.AccountList{Accounts: l} },
		header: "ID\tNAME\tCONCURRENCY\tTRIAL-HOURS\tUSED-HOURS",
		row: func(acc api.Account) string {
			trial, used := "-", "-"
			if acc.TrialHours > 0 {
				trial, used = formatAmount(acc.TrialHours, -1), formatAmount(acc.TrialUsedHours, 2)
			}
			return fmt.Sprintf("%s\t%s\t%d\t%s\t%s", acc.ID, acc.Name, acc.Concurrency, trial, used)
		},
	})
}

// keysVerbs are the verbs of "withruntime keys".
func (a *App) keysVerbs() []leaf {
	return []leaf{
		{use: "create [--account NAME] [--read-only] [--daily-limit-usd X] [--name N] [--format F] [--json]",
			short: "create an API key and print it", about: keysCreateAbout, define: a.keysCreate},
		{use: "ls [--account NAME] [--json]", short: "list API keys (never their secrets)", aliases: []string{"list"},
			about: "Lists API keys, never their secret part.", define: a.keysList},
		{use: "rm ID...", short: "remove API keys",
			about: "Removes API keys, and the keys made with them: each stops working at once.\nPrints each id removed.", define: a.keysRemove},
	}
}

// usageLeaf is "withruntime usage".
func (a *App) usageLeaf() leaf {
	return leaf{use: "usage [--account NAME] [--key ID] [--from DAY] [--to DAY] [--json]",
		short: "usage and cost per day, account and key",
		about: `Shows usage and cost per UTC day, account and key, with a total. Days are
YYYY-MM-DD, both ends included.`, define: a.usageCmd}
}

const keysCreateAbout = `Creates an API key and prints it: the server shows it this once and keeps
only its hash. With --json, prints the key's record, its "key" field being
the key itself. A key made with a key other than the admin key answers to
it: its daily limit is at most the maker's (the maker's when none is given)
and what it spends counts against the maker's limit too.

--format e2b writes the key the way E2B's keys are written, "e2b_" and hex
digits, for programs written for E2B (their SDKs may refuse other keys);
it is the same key as any other in every other respect.`

func (a *App) keysCreate(cmd *command, s streams) runFunc {
	account := cmd.fs.String("account", "", "the key's account, by `NAME` (admin key only; default the caller's)")
	readOnly := cmd.fs.Bool("read-only", false, "a read-only key: it reads everything its account may read and changes nothing")
	var limit int64
	cmd.fs.Func("daily-limit-usd", "refuse creates with this key, and stop its sandboxes, once it and the keys made with it have spent `X` dollars in a UTC day (up to 6 decimals)", func(v string) error {
		n, err := parseUSD(v)
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("must be positive (without the flag the key has no limit)")
		}
		limit = n
		return nil
	})
	name := cmd.fs.String("name", "", "a `NAME` for the key, for people")
	format := cmd.fs.String("format", "withruntime", "how the key is written: `F` is withruntime (wr_...) or e2b (e2b_ and hex digits, for E2B's SDKs)")
	asJSON := cmd.fs.Bool("json", false, "print the key's record as JSON, the key in its \"key\" field")
	return func(ctx context.Context, pos []string) int {
		if len(pos) > 0 {
			return cmd.usageError(s, "unexpected argument %q", pos[0])
		}
		if *format != "withruntime" && *format != "e2b" {
			return cmd.usageError(s, "--format must be withruntime or e2b, not %q", *format)
		}
		req := api.CreateKeyRequest{Account: *account, Kind: "full", Name: *name, DailyLimitMicros: limit}
		if *format == "e2b" {
			// Only then: a server from before formats refuses the field.
			req.Format = "e2b"
		}
		if *readOnly {
			req.Kind = "read_only"
		}
		c, done, err := a.connect(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		// Not canceled by Ctrl-C: a key made but never printed is a key nobody
		// can use or knows the id of.
		k, err := c.CreateKey(context.WithoutCancel(ctx), req)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			return printJSON(s, k)
		}
		if k.Secret == "" {
			report(s.stderr, &cliError{client.CodeInternal, fmt.Sprintf("the server created key %s but did not return it", k.ID)})
			return exitFailure
		}
		fmt.Fprintln(s.stdout, k.Secret)
		return exitOK
	}
}

func (a *App) keysList(cmd *command, s streams) runFunc {
	account := cmd.fs.String("account", "", "the keys of account `NAME` (admin key only; default the caller's)")
	return runListing(a, s, listing[api.Key]{
		cmd: cmd,
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]api.Key, error) {
			return c.ListKeys(ctx, *account)
		},
		asJSON: func(l []api.Key) any { return api.KeyList{Keys: l} },
		header: "ID\tACCOUNT\tKIND\tNAME\tDAILY-LIMIT-USD\tPARENT\tCREATED",
		row: func(k api.Key) string {
			limit := "-"
			if k.DailyLimitMicros > 0 {
				limit = formatUSD(k.DailyLimitMicros)
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", k.ID, dash(k.Account), dash(k.Kind), dash(k.Name), limit, dash(k.Parent), timeString(&k.CreatedAt))
		},
	})
}

func (a *App) keysRemove(cmd *command, s streams) runFunc {
	return func(ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return cmd.usageError(s, "want at least one key ID")
		}
		c, done, err := a.connect(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		status := exitOK
		for _, id := range pos {
			if err := c.DeleteKey(ctx, id); err != nil {
				report(s.stderr, err)
				status = exitFailure
				continue
			}
			fmt.Fprintln(s.stdout, id)
		}
		return status
	}
}

// usageCmd runs "withruntime usage ...".
func (a *App) usageCmd(cmd *command, s streams) runFunc {
	var f client.UsageFilter
	cmd.fs.StringVar(&f.Account, "account", "", "the usage of account `NAME` (admin key only; default the caller's)")
	cmd.fs.StringVar(&f.Key, "key", "", "only what key `ID` spent")
	dayFlag := func(dst *string) func(string) error {
		return func(v string) error {
			if _, err := time.Parse(time.DateOnly, v); err != nil {
				return errors.New("want a day as YYYY-MM-DD")
			}
			*dst = v
			return nil
		}
	}
	cmd.fs.Func("from", "from `DAY` (YYYY-MM-DD, UTC)", dayFlag(&f.From))
	cmd.fs.Func("to", "up to `DAY` included (YYYY-MM-DD, UTC)", dayFlag(&f.To))
	asJSON := cmd.fs.Bool("json", false, "print the usage as JSON")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) > 0 {
			return cmd.usageError(s, "unexpected argument %q", pos[0])
		}
		if f.From != "" && f.To != "" && f.From > f.To {
			return cmd.usageError(s, "--from %s is after --to %s", f.From, f.To)
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		u, err := c.Usage(ctx, f)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			if u.Rows == nil {
				u.Rows = []api.UsageRow{}
			}
			return printJSON(s, u)
		}
		tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DAY\tACCOUNT\tKEY\tSANDBOX-HOURS\tCPU-HOURS\tCOST-USD")
		var hours, cpu float64
		for _, r := range u.Rows {
			hours += r.SandboxHours
			cpu += r.CPUHours
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Day, dash(r.Account), dash(r.KeyID),
				formatAmount(r.SandboxHours, 4), formatAmount(r.CPUHours, 4), formatUSD(r.CostMicros))
		}
		fmt.Fprintf(tw, "TOTAL\t\t\t%s\t%s\t%s\n", formatAmount(hours, 4), formatAmount(cpu, 4), formatUSD(u.CostMicros))
		tw.Flush()
		return exitOK
	}
}
