package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// maxSecretBytes is the largest value the server stores.
const maxSecretBytes = 16 << 10

// pipeHint says how to give a secret's value.
const pipeHint = `pipe it in, as in: printf %s "$KEY" | withruntime secrets set NAME --host HOST`

// secretsVerbs are the verbs of "withruntime secrets".
func (a *App) secretsVerbs() []leaf {
	return []leaf{
		{use: "set NAME --host HOST [--json] [< VALUE]", short: "store a secret (typed, or on stdin), sent only to HOST", about: secretsSetAbout, define: a.secretsSet},
		{use: "ls [--json]", short: "list secrets (names and hosts, never values)", aliases: []string{"list"},
			about: "Lists the secrets of the key's account: names and hosts, never values.", define: a.secretsList},
		{use: "rm NAME...", short: "remove secrets",
			about: "Removes secrets: commands started afterwards no longer see them. Prints each name removed.", define: a.secretsRemove},
	}
}

const secretsSetAbout = `Stores a secret of the key's account, replacing the one named NAME if any.
From a terminal, it asks for the value and reads one line without showing it
(as docker login does; up to about 4 KiB: pipe a longer one). Otherwise the
value is read from standard input exactly as given: use printf %s "$KEY",
not echo, which adds a newline. Every command in the account's sandboxes sees
NAME set to a placeholder; the platform puts the value in its place only in
HTTPS requests to HOST (a name such as api.openai.com, or *.example.org for
every name under example.org). Prints nothing; no command shows the value.`

func (a *App) secretsSet(cmd *command, s streams) runFunc {
	host := cmd.fs.String("host", "", "send the value only to `HOST` (required)")
	asJSON := cmd.fs.Bool("json", false, "print the secret's name, host and time as JSON")
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		// Arguments are never echoed: a value typed in the wrong place would be.
		if len(pos) != 1 {
			return cmd.usageError(s, "want one secret NAME, got %d arguments (the value goes on standard input)", len(pos))
		}
		name := pos[0]
		if !(api.EnvName(name) && len(name) <= 128) {
			return cmd.usageError(s, "NAME must be an environment variable name: letters, digits and '_', not starting with a digit (the value goes on standard input)")
		}
		if *host == "" {
			return cmd.usageError(s, "--host HOST is required: the secret is sent to that host only")
		}
		value, err := readSecretValue(ctx, s, name, *host)
		if err != nil {
			report(s.stderr, err)
			if code := signalExitCode(ctx); code != 0 {
				return code
			}
			return exitFailure
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		info, err := c.SetSecret(ctx, name, *host, value)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			return printJSON(s, info)
		}
		return exitOK
	}
}

// readSecretValue is the value of secret name for host: typed at a prompt
// with the terminal's echo off when stdin is a terminal, else stdin as it
// is.
func readSecretValue(ctx context.Context, s streams, name, host string) (string, error) {
	if f, ok := s.stdin.(*os.File); ok && f != nil && isTerminal(f) {
		return promptSecret(ctx, f, s.stderr, fmt.Sprintf("Value of %s (sent only to %s; not shown as you type): ", name, host))
	}
	return readSecret(s.stdin)
}

// promptSecret prints prompt on w and reads one line from terminal f with
// its echo off, as docker login and ssh do. The echo comes back however it
// ends, Ctrl-C included (the signal ends ctx; the read is left behind).
func promptSecret(ctx context.Context, f *os.File, w io.Writer, prompt string) (string, error) {
	refuse := func(msg string) (string, error) {
		return "", &cliError{client.CodeInvalidRequest, msg}
	}
	restore, err := echoOff(f)
	if err != nil {
		return refuse("turning the terminal's echo off: " + err.Error() + ": " + pipeHint)
	}
	defer restore()
	fmt.Fprint(w, prompt)
	type line struct {
		text string
		err  error
	}
	read := make(chan line, 1)
	go func() {
		b, err := bufio.NewReader(io.LimitReader(f, maxSecretBytes+2)).ReadString('\n')
		read <- line{b, err}
	}()
	var l line
	select {
	case <-ctx.Done():
		fmt.Fprintln(w)
		return "", context.Canceled
	case l = <-read:
	}
	// The Enter that ended the line was not echoed either.
	fmt.Fprintln(w)
	if l.err != nil && l.err != io.EOF {
		return refuse("reading the value from the terminal: " + l.err.Error())
	}
	value := strings.TrimSuffix(strings.TrimSuffix(l.text, "\n"), "\r")
	switch {
	case value == "":
		return refuse("no value typed: type it at the prompt, or " + pipeHint)
	case len(value) > maxSecretBytes:
		return refuse(fmt.Sprintf("the value typed is larger than %d bytes", maxSecretBytes))
	}
	return value, nil
}

// readSecret reads a secret's value from r as it is. A device that is not
// a terminal is refused; so are an empty value and one that ends with a
// newline, which echo adds.
func readSecret(r io.Reader) (string, error) {
	refuse := func(msg string) (string, error) {
		return "", &cliError{client.CodeInvalidRequest, msg}
	}
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return refuse("the value is read from standard input, which is a device and not a terminal: " + pipeHint)
		}
	}
	if r == nil {
		r = strings.NewReader("")
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSecretBytes+1))
	if err != nil {
		return refuse("reading the value from standard input: " + err.Error())
	}
	switch {
	case len(b) == 0:
		return refuse("the value on standard input is empty: " + pipeHint)
	case len(b) > maxSecretBytes:
		return refuse(fmt.Sprintf("the value on standard input is larger than %d bytes", maxSecretBytes))
	case b[len(b)-1] == '\n':
		return refuse(`the value on standard input ends with a newline: pass it with printf %s "$KEY", not echo`)
	}
	return string(b), nil
}

func (a *App) secretsList(cmd *command, s streams) runFunc {
	return runListing(a, s, listing[api.SecretInfo]{
		cmd: cmd, trial: trialFlag(cmd.fs),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]api.SecretInfo, error) {
			return c.ListSecrets(ctx)
		},
		asJSON: func(l []api.SecretInfo) any { return api.SecretList{Secrets: l} },
		header: "NAME\tHOST\tUPDATED",
		row: func(sec api.SecretInfo) string {
			return sec.Name + "\t" + sec.Host + "\t" + timeString(&sec.UpdatedAt)
		},
	})
}

func (a *App) secretsRemove(cmd *command, s streams) runFunc {
	trial := trialFlag(cmd.fs)
	return func(ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return cmd.usageError(s, "want at least one secret NAME")
		}
		for i, name := range pos {
			if !(api.EnvName(name) && len(name) <= 128) {
				return cmd.usageError(s, "argument %d is not a secret NAME (an environment variable name)", i+1)
			}
		}
		c, done, _, err := a.connectTrial(ctx, s, *trial, false)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		return removeEach(ctx, s, pos, c.DeleteSecret)
	}
}

// removeEach removes each of names with rm, printing each name removed
// and reporting each failure; it fails when any did.
func removeEach(ctx context.Context, s streams, names []string, rm func(context.Context, string) error) int {
	status := exitOK
	for _, name := range names {
		if err := rm(ctx, name); err != nil {
			report(s.stderr, err)
			status = exitFailure
			continue
		}
		fmt.Fprintln(s.stdout, name)
	}
	return status
}
