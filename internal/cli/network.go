package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

const networkAbout = `Shows the network policy of a sandbox, or with a flag changes it while the
sandbox runs (or is paused): --internet turns the internet on with no allow
list, --allow HOST (exact or *.domain; repeatable) lets it reach those hosts
and no other, --off turns the network off. New connections and DNS queries
follow the new policy at once; a connection already open runs on until it
closes. Prints the policy: off, internet, or internet, only HOST...`

func (a *App) sandboxNetwork(cmd *command, s streams) runFunc {
	var allow listValue
	internet := cmd.fs.Bool("internet", false, "turn the internet on with no allow list (with --allow: only those hosts)")
	cmd.fs.Var(&allow, "allow", "let the sandbox reach `HOST` (exact or *.domain; repeatable) and no other")
	off := cmd.fs.Bool("off", false, "turn the sandbox's network off")
	asJSON := cmd.fs.Bool("json", false, "print the policy as JSON")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return cmd.usageError(s, "want one sandbox ID, got %d arguments", len(pos))
		}
		want, change, msg := networkChange(*internet, *off, allow)
		if msg != "" {
			return cmd.usageError(s, "%s", msg)
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		var got api.Network
		if change {
			sbx, err := c.SetNetwork(ctx, pos[0], want)
			if err != nil {
				report(s.stderr, err)
				return exitFailure
			}
			got = sbx.Network
		} else {
			n, err := c.GetNetwork(ctx, pos[0])
			if err != nil {
				report(s.stderr, err)
				return exitFailure
			}
			got = *n
		}
		if *asJSON {
			return printJSON(s, got)
		}
		fmt.Fprintln(s.stdout, networkString(got))
		return exitOK
	}
}

// networkChange turns the flags of "sandbox network" into the policy to
// set; change false means no flag: show the policy. msg is a usage error:
// --off with --internet or --allow asks for two things at once.
func networkChange(internet, off bool, allow []string) (want api.Network, change bool, msg string) {
	switch {
	case off && (internet || len(allow) > 0):
		return api.Network{}, false, "--off cannot go with --internet or --allow"
	case off:
		return api.Network{}, true, ""
	case internet || len(allow) > 0:
		return api.Network{Internet: true, Allow: allow}, true, ""
	}
	return api.Network{}, false, ""
}

// networkString is a policy in words, as "sandbox get" shows it.
func networkString(n api.Network) string {
	if !n.Internet {
		return "off"
	}
	if len(n.Allow) == 0 {
		return "internet"
	}
	return "internet, only " + strings.Join(n.Allow, " ")
}

// A sandbox whose network is off drops every packet it sends before the
// host's resolver or proxy sees it (the packet rules keep it offline), so
// its egress log stays empty and a program only says that a name did not
// resolve or a connection timed out. run and exec therefore watch the
// command's stderr for such messages and, when the command failed with
// one and the sandbox's network is off, say once what is wrong and how to
// change it. The watch is a hint, never a verdict: the exit code is the
// command's.

// netFailures are the lowercase fragments of the messages with which the
// usual tools report a name that did not resolve or a connection that did
// not open: glibc's getaddrinfo (Python, pip, apt), curl, git, Node, Go.
var netFailures = []string{
	"temporary failure in name resolution",
	"name or service not known",
	"no address associated with hostname",
	"temporary failure resolving",
	"could not resolve",
	"failed to resolve",
	"nameresolutionerror",
	"newconnectionerror",
	"getaddrinfo",
	"eai_again",
	"enotfound",
	"network is unreachable",
	"no route to host",
	"connection timed out",
	"failed to connect to",
	"could not connect to",
	"dial tcp",
}

// netWatchTail is how many bytes of a write are kept to find a message
// split across two writes: longer than the longest fragment.
const netWatchTail = 64

// netWatch passes a command's stderr through and remembers whether it
// held a network failure.
type netWatch struct {
	w    io.Writer
	mu   sync.Mutex
	tail []byte
	hit  bool
}

func (n *netWatch) Write(p []byte) (int, error) {
	n.see(p)
	if n.w == nil {
		return len(p), nil
	}
	return n.w.Write(p)
}

// see looks for a failure in what came before (its tail) and p.
func (n *netWatch) see(p []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hit {
		return
	}
	buf := bytes.ToLower(append(n.tail, p...))
	for _, f := range netFailures {
		if bytes.Contains(buf, []byte(f)) {
			n.hit = true
			return
		}
	}
	n.tail = append(n.tail[:0], buf[max(0, len(buf)-netWatchTail):]...)
}

func (n *netWatch) failed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hit
}

// netHintTimeout bounds the one policy read behind the hint.
const netHintTimeout = 5 * time.Second

// networkOffHint prints, once, that the sandbox's network is off and
// how to turn it on, when the command exited non-zero (code) after a
// network failure on its stderr (w) and the sandbox's policy says off.
// run makes a sandbox that ends with the command: its hint names run's
// flags; exec's names "sandbox network".
func networkOffHint(ctx context.Context, s streams, c *client.Client, id string, w *netWatch, code int, run bool) {
	if code == exitOK || w == nil || !w.failed() {
		return
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), netHintTimeout)
	defer cancel()
	n, err := c.GetNetwork(hctx, id)
	if err != nil || n.Internet {
		return // no hint rather than a wrong one
	}
	how := "turn it on with: withruntime sandbox network " + id + " --internet (or --allow HOST)"
	if run {
		how = "run it with --internet (or --allow HOST)"
	}
	fmt.Fprintf(s.stderr, "withruntime: the sandbox's network is off; %s\n", how)
}

// emptyEgressNote says, on stderr, why the egress log of a sandbox whose
// network is off is empty: what it sends never reaches the proxy that
// keeps the log.
func emptyEgressNote(ctx context.Context, s streams, c *client.Client, id string) {
	hctx, cancel := context.WithTimeout(ctx, netHintTimeout)
	defer cancel()
	n, err := c.GetNetwork(hctx, id)
	if err != nil || n.Internet {
		return
	}
	fmt.Fprintf(s.stderr, "withruntime: the sandbox's network is off: the host drops all it sends before the egress proxy, so nothing is logged; turn it on with: withruntime sandbox network %s --internet (or --allow HOST)\n", id)
}
