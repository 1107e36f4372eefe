package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// topInterval is how often "sandbox top" refreshes: the server samples a
// sandbox every 5 seconds, so a faster refresh would show nothing new.
const topInterval = 5 * time.Second

const topAbout = `Shows a running sandbox's resource use, refreshed every 5 seconds as the
server samples it, like top: CPU used (of its CPUs), memory and disk used of
their totals, network receive and send rates, and the sandbox's age. On a
terminal it redraws the screen; otherwise it prints one line per refresh:

  TIME cpu=PCT% cpus=N mem=USED/TOTAL disk=USED/TOTAL rx=RATE/s tx=RATE/s age=D

-n N stops after N refreshes (as top's -n); without it, Ctrl-C stops, and the
sandbox's end (exit 1, saying so). --json
prints the samples instead, one JSON object a line (the API's SandboxMetric):
every sample kept at the first refresh, then each new one. The figures for
memory, disk and network come from inside the sandbox: they are for watching,
never for billing.`

func (a *App) topVerbs() []leaf {
	return []leaf{{use: "top [-n N] [--json] ID", short: "show a sandbox's CPU, memory, disk and network use, refreshing like top",
		about: topAbout, define: a.sandboxTop}}
}

func (a *App) sandboxTop(cmd *command, s streams) runFunc {
	n := cmd.fs.IntP("iterations", "n", 0, "stop after `N` refreshes (0: until Ctrl-C)")
	asJSON := cmd.fs.Bool("json", false, "print the samples as JSON, one a line")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return cmd.usageError(s, "want one sandbox ID, got %d arguments", len(pos))
		}
		if *n < 0 {
			return cmd.usageError(s, "-n: want 0 or more refreshes, not %d", *n)
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		t := &topView{s: s, id: pos[0], c: c, json: *asJSON}
		if f, ok := s.stdout.(*os.File); ok && !*asJSON && isTerminal(f) {
			t.screen = f
		}
		return endLogs(ctx, s, t.run(ctx, *n))
	}
}

// topView is one "sandbox top": the samples seen so far and how to show
// them.
type topView struct {
	s      streams
	id     string
	c      *client.Client
	json   bool
	screen *os.File // the terminal redrawn; nil: a line per refresh

	sbx        *api.Sandbox
	last, prev *api.SandboxMetric // the newest sample and the one before
}

func (t *topView) run(ctx context.Context, n int) error {
	sbx, err := t.c.GetSandbox(ctx, t.id)
	if err != nil {
		return err
	}
	t.sbx = sbx
	for i := 0; n == 0 || i < n; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(topInterval):
			}
		}
		fresh, err := t.fetch(ctx, i == 0)
		if err != nil {
			return err
		}
		if err := t.show(fresh); err != nil {
			return err
		}
	}
	return nil
}

// fetch reads the samples newer than the last one seen. The first time it
// reads them all, and waits for one if there is none yet (a sandbox's
// first sample comes within 5 seconds of its start): there is nothing to
// show before.
func (t *topView) fetch(ctx context.Context, first bool) ([]api.SandboxMetric, error) {
	for {
		var since time.Time
		if t.last != nil {
			since = t.last.Timestamp
		}
		ms, err := t.c.SandboxMetrics(ctx, t.id, since, time.Time{})
		if err != nil {
			return nil, err
		}
		var fresh []api.SandboxMetric
		for _, m := range ms {
			if t.last == nil || m.Timestamp.After(t.last.Timestamp) {
				fresh = append(fresh, m)
				m := m
				t.prev, t.last = t.last, &m
			}
		}
		if len(fresh) == 0 && !first {
			// Nothing new: a sandbox that ended gets no more samples
			// (and keeps none), so top ends with it; a paused one says so.
			sbx, err := t.c.GetSandbox(ctx, t.id)
			if err != nil {
				return nil, err
			}
			t.sbx = sbx
			if sbx.State == "ended" {
				return nil, fmt.Errorf("sandbox %s has ended (%s)", t.id, dash(sbx.EndReason))
			}
		}
		if t.last != nil || !first {
			return fresh, nil
		}
		// No sample yet: a sandbox that is not running never gets one.
		sbx, err := t.c.GetSandbox(ctx, t.id)
		if err != nil {
			return nil, err
		}
		if sbx.State != "running" {
			return nil, fmt.Errorf("sandbox %s is %s: only a running sandbox is sampled", t.id, sbx.State)
		}
		t.sbx = sbx
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (t *topView) show(fresh []api.SandboxMetric) error {
	if t.json {
		enc := json.NewEncoder(t.s.stdout)
		for _, m := range fresh {
			if err := enc.Encode(m); err != nil {
				return err
			}
		}
		return nil
	}
	if t.last == nil {
		// Only a later refresh of a sandbox with no samples gets here,
		// which fetch prevents; say so rather than print nothing.
		_, err := fmt.Fprintf(t.s.stdout, "%s no samples\n", time.Now().UTC().Format(time.RFC3339))
		return err
	}
	m := t.last
	rx, tx := t.rates()
	age := m.Timestamp.Sub(t.sbx.CreatedAt).Truncate(time.Second)
	if t.screen == nil {
		_, err := fmt.Fprintf(t.s.stdout, "%s cpu=%.1f%% cpus=%d mem=%s/%s disk=%s/%s rx=%s/s tx=%s/s age=%s\n",
			m.Timestamp.UTC().Format(time.RFC3339), m.CPUUsedPct, m.CPUCount,
			formatBytes(m.MemUsed), formatBytes(m.MemTotal), formatBytes(m.DiskUsed), formatBytes(m.DiskTotal),
			rx, tx, age)
		return err
	}
	width := 80
	if w, _, err := term.GetSize(int(t.screen.Fd())); err == nil && w > 0 {
		width = w
	}
	barWidth := max(10, min(50, width-40))
	var b strings.Builder
	// Home and clear, as top redraws: the last screen stays when it ends.
	b.WriteString("\x1b[H\x1b[2J")
	fmt.Fprintf(&b, "sandbox %s  %s  age %s  sampled %s  (every 5s; Ctrl-C quits)\r\n\r\n",
		t.id, t.sbx.State, age, m.Timestamp.Local().Format(time.TimeOnly))
	fmt.Fprintf(&b, "CPU   %s %5.1f%% of %d CPUs\r\n", bar(m.CPUUsedPct/100, barWidth), m.CPUUsedPct, m.CPUCount)
	fmt.Fprintf(&b, "MEM   %s %s / %s\r\n", bar(ratio(m.MemUsed, m.MemTotal), barWidth), formatBytes(m.MemUsed), formatBytes(m.MemTotal))
	fmt.Fprintf(&b, "DISK  %s %s / %s\r\n", bar(ratio(m.DiskUsed, m.DiskTotal), barWidth), formatBytes(m.DiskUsed), formatBytes(m.DiskTotal))
	fmt.Fprintf(&b, "NET   rx %s/s  tx %s/s  (in all: rx %s, tx %s)\r\n", rx, tx, formatBytes(m.NetRx), formatBytes(m.NetTx))
	_, err := io.WriteString(t.s.stdout, b.String())
	return err
}

// rates are the network's receive and send rates between the last two
// samples ("-" before there are two, or when a counter went back, as
// after a resume).
func (t *topView) rates() (rx, tx string) {
	if t.prev == nil || t.last == nil {
		return "-", "-"
	}
	dt := t.last.Timestamp.Sub(t.prev.Timestamp).Seconds()
	rate := func(a, b int64) string {
		if dt <= 0 || b < a {
			return "-"
		}
		return formatBytes(int64(float64(b-a) / dt))
	}
	return rate(t.prev.NetRx, t.last.NetRx), rate(t.prev.NetTx, t.last.NetTx)
}

func ratio(used, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(used) / float64(total)
}

// bar draws f (0 to 1) as a bar of width cells: [#####-----].
func bar(f float64, width int) string {
	f = max(0, min(1, f))
	full := int(f*float64(width) + 0.5)
	return "[" + strings.Repeat("#", full) + strings.Repeat("-", width-full) + "]"
}
