package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// previewVerbs are the verbs of "withruntime sandbox" that reach a
// sandbox's ports: preview URLs and port forwarding.
func (a *App) previewVerbs() []leaf {
	return []leaf{
		{use: "port-forward [--address ADDR] ID [LOCAL:]REMOTE...", short: "forward local TCP ports to ports of a sandbox, like kubectl port-forward",
			about: portForwardAbout, define: a.sandboxPortForward},
		{use: "expose [--public | --private] [--json] ID PORT", short: "make a port's preview URL public (or private again)",
			about: exposeAbout, define: a.sandboxExpose},
		{use: "preview-url [--expires-in D] [--json] ID PORT", short: "print a URL that opens a port of a sandbox in a browser",
			about: previewURLAbout, define: a.sandboxPreviewURL},
		{use: "preview-revoke ID", short: "make every preview token of a sandbox stop working",
			about: previewRevokeAbout, define: a.sandboxPreviewRevoke},
	}
}

const portForwardAbout = `Listens on local TCP ports and forwards each connection to a port of the
sandbox (its 127.0.0.1: a database, a debugger, a dev server), as
"kubectl port-forward" does, until Ctrl-C. LOCAL:REMOTE forwards local port
LOCAL to REMOTE; a PORT alone is the same port on both sides; :REMOTE (or
0:REMOTE) takes a free local port. Each connection is carried by a WebSocket
of the API (GET /v1/sandboxes/{id}/port-forward/{port}); a connection the
sandbox refuses (nothing listens on the port) is closed with an error here,
and the forwarding goes on. It ends when the sandbox does.`

const exposeAbout = `Makes a port of a sandbox public: its preview URL (printed) opens with no key
or token, for anyone who has it. --private makes it private again: a
request then needs an API key or a preview token (preview-url prints a URL
signed with one).`

const previewURLAbout = `Prints a URL that opens a port of a sandbox in a browser: the server's host
form ({port}-{id}.{domain}) when it has one, else the port's path on the
API. Unless the port is public, the URL is signed with a new preview token
for that sandbox and port, valid for --expires-in (default 24h; 1m to 7
days); the first visit trades it for a cookie. Tokens are not API keys;
"sandbox preview-revoke ID" makes them all stop working.`

const previewRevokeAbout = `Makes every preview token made so far for a sandbox stop working (signed
URLs and the cookies they set included). Public ports stay public
("sandbox expose --private" makes them private).`

// forward is one LOCAL:REMOTE of port-forward.
type forward struct {
	local, remote int
}

// parseForward reads "LOCAL:REMOTE", "PORT" or ":REMOTE".
func parseForward(arg string) (forward, error) {
	localS, remoteS, both := strings.Cut(arg, ":")
	if !both {
		remoteS = localS
	}
	port := func(s string, zero bool) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 65535 || (n == 0 && !zero) {
			return 0, fmt.Errorf("%q is not a port in %q (want LOCAL:REMOTE or PORT, 1 to 65535)", s, arg)
		}
		return n, nil
	}
	remote, err := port(remoteS, false)
	if err != nil {
		return forward{}, err
	}
	local := remote
	if both {
		if localS == "" {
			return forward{local: 0, remote: remote}, nil
		}
		if local, err = port(localS, true); err != nil {
			return forward{}, err
		}
	}
	return forward{local: local, remote: remote}, nil
}

func (a *App) sandboxPortForward(cmd *command, s streams) runFunc {
	address := cmd.fs.String("address", "127.0.0.1", "listen on `ADDR` (an IP address or localhost)")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) < 2 {
			return cmd.usageError(s, "want a sandbox ID and at least one LOCAL:REMOTE, got %d arguments", len(pos))
		}
		id := pos[0]
		var fwds []forward
		for _, arg := range pos[1:] {
			f, err := parseForward(arg)
			if err != nil {
				return cmd.usageError(s, "%v", err)
			}
			fwds = append(fwds, f)
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		// Said at once rather than at the first connection: a wrong id,
		// or a sandbox that has ended.
		sbx, err := c.GetSandbox(ctx, id)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if sbx.State == "ended" {
			report(s.stderr, &cliError{code: client.CodeNotFound, msg: fmt.Sprintf("sandbox %s has ended (%s)", id, sbx.EndReason)})
			return exitFailure
		}
		pf := &portForwarder{c: c, id: id, stderr: s.stderr, conns: map[net.Conn]struct{}{}}
		pf.ctx, pf.stop = context.WithCancelCause(ctx)
		defer pf.stop(nil)
		var lns []net.Listener
		defer func() {
			for _, ln := range lns {
				ln.Close()
			}
		}()
		for _, f := range fwds {
			ln, err := net.Listen("tcp", net.JoinHostPort(*address, strconv.Itoa(f.local)))
			if err != nil {
				report(s.stderr, fmt.Errorf("port-forward: %w", err))
				return exitFailure
			}
			lns = append(lns, ln)
			fmt.Fprintf(s.stdout, "Forwarding from %s -> %d\n", ln.Addr(), f.remote)
		}
		for i, ln := range lns {
			pf.wg.Add(1)
			go pf.serve(ln, fwds[i].remote)
		}
		<-pf.ctx.Done()
		for _, ln := range lns {
			ln.Close()
		}
		pf.closeAll()
		pf.wg.Wait()
		if err := context.Cause(pf.ctx); ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			pf.report(err)
			return exitFailure
		}
		if code := signalExitCode(ctx); code != 0 {
			return code
		}
		return exitOK
	}
}

// portForwarder serves the connections of one port-forward.
type portForwarder struct {
	c      *client.Client
	id     string
	ctx    context.Context
	stop   context.CancelCauseFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards stderr's writes and conns
	stderr io.Writer
	conns  map[net.Conn]struct{}
}

func (pf *portForwarder) report(err error) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	report(pf.stderr, err)
}

// track adds conn to the connections closed at the end, or closes it at
// once when the end has come; it says whether conn was added.
func (pf *portForwarder) track(conn net.Conn) bool {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.conns == nil {
		conn.Close()
		return false
	}
	pf.conns[conn] = struct{}{}
	return true
}

func (pf *portForwarder) untrack(conn net.Conn) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	delete(pf.conns, conn)
	conn.Close()
}

func (pf *portForwarder) closeAll() {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	for conn := range pf.conns {
		conn.Close()
	}
	pf.conns = nil
}

func (pf *portForwarder) serve(ln net.Listener, remote int) {
	defer pf.wg.Done()
	for {
		lc, err := ln.Accept()
		if err != nil {
			if pf.ctx.Err() == nil {
				pf.stop(fmt.Errorf("port-forward: %w", err))
			}
			return
		}
		if !pf.track(lc) {
			return
		}
		pf.wg.Add(1)
		go pf.handle(lc, remote)
	}
}

// handle carries one local connection to port remote of the sandbox. A
// refusal ends that connection only, with a message; a sandbox that is
// gone ends the whole forwarding.
func (pf *portForwarder) handle(lc net.Conn, remote int) {
	defer pf.wg.Done()
	defer pf.untrack(lc)
	rc, err := pf.c.DialPort(pf.ctx, pf.id, remote)
	if err != nil {
		if pf.ctx.Err() != nil {
			return
		}
		if errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrLeaseEnded) {
			pf.stop(err)
			return
		}
		code, msg := errorCode(err)
		pf.mu.Lock()
		printError(pf.stderr, code, fmt.Sprintf("connection from %s to port %d of %s: %s", lc.RemoteAddr(), remote, pf.id, msg))
		pf.mu.Unlock()
		return
	}
	if !pf.track(rc) {
		return
	}
	defer pf.untrack(rc)
	// Either side's end ends both: the WebSocket has no half-close.
	done := make(chan struct{}, 2)
	go func() { io.Copy(rc, lc); done <- struct{}{} }()
	go func() { io.Copy(lc, rc); done <- struct{}{} }()
	<-done
}

// parsePort reads the PORT argument of expose and preview-url.
func parsePort(cmd *command, s streams, arg string) (int, int, bool) {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > 65535 {
		return 0, cmd.usageError(s, "%q is not a port (1 to 65535)", arg), false
	}
	return n, 0, true
}

func (a *App) sandboxExpose(cmd *command, s streams) runFunc {
	public := cmd.fs.Bool("public", false, "make the port public: no key or token needed (the default)")
	private := cmd.fs.Bool("private", false, "make the port private again: a key or a preview token needed")
	asJSON := cmd.fs.Bool("json", false, "print the preview as JSON")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 2 {
			return cmd.usageError(s, "want a sandbox ID and a PORT, got %d arguments", len(pos))
		}
		if *public && *private {
			return cmd.usageError(s, "--public and --private cannot go together")
		}
		port, code, ok := parsePort(cmd, s, pos[1])
		if !ok {
			return code
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		p, err := c.SetPreviewPublic(ctx, pos[0], port, !*private)
		return showPreview(s, c, p, err, *asJSON)
	}
}

// showPreview prints a preview that a call answered with err: the URL to
// open, or with asJSON the whole preview.
func showPreview(s streams, c *client.Client, p *api.Preview, err error, asJSON bool) int {
	if err != nil {
		report(s.stderr, err)
		return exitFailure
	}
	if asJSON {
		return printJSON(s, p)
	}
	fmt.Fprintln(s.stdout, c.PreviewURL(p))
	return exitOK
}

func (a *App) sandboxPreviewURL(cmd *command, s streams) runFunc {
	var expires durationValue
	cmd.fs.Var(&expires, "expires-in", "the token's life: `SECONDS` or a duration such as 2h (default 24h; 1m to 168h)")
	asJSON := cmd.fs.Bool("json", false, "print the preview as JSON (its token included)")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 2 {
			return cmd.usageError(s, "want a sandbox ID and a PORT, got %d arguments", len(pos))
		}
		port, code, ok := parsePort(cmd, s, pos[1])
		if !ok {
			return code
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		p, err := c.Preview(ctx, pos[0], port, expires.d)
		return showPreview(s, c, p, err, *asJSON)
	}
}

func (a *App) sandboxPreviewRevoke(cmd *command, s streams) runFunc {
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
		if err := c.RevokePreviews(ctx, pos[0]); err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		fmt.Fprintln(s.stdout, pos[0])
		return exitOK
	}
}
