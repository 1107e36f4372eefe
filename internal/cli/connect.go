package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// connect returns a client of the server the command talks to, and what to
// call when the command is done.
//
// WITHRUNTIME_BASE_URL set (and not empty): that server, with no check and
// no fallback; if it does not answer, the command fails. Unset: the default
// address, where the local daemon is started first when nothing answers
// (see daemon.go).
func (a *App) connect(ctx context.Context) (*client.Client, func(), error) {
	c, done, _, err := a.dial(ctx)
	return c, done, err
}

// trialUse says that a command uses the trial key stored for a server.
type trialUse struct {
	path    string // the configuration file
	baseURL string
	fresh   bool // obtained by this command, not read from the file
}

// connectTrial is connect for commands with --trial. Without the flag, or
// with the local daemon's admin key (its owner is the only user), or when
// WITHRUNTIME_API_KEY is set (the user has a key), --trial changes
// nothing. Otherwise the command uses the trial key stored for the server
// in the configuration file; when there is none and obtain is true, it asks
// the server for one (POST /v1/trial) and stores it. The trialUse is nil
// when no trial key is used.
func (a *App) connectTrial(ctx context.Context, s streams, trial, obtain bool) (*client.Client, func(), *trialUse, error) {
	c, done, admin, err := a.dial(ctx)
	if err != nil || !trial || admin || os.Getenv(client.EnvAPIKey) != "" {
		return c, done, nil, err
	}
	fail := func(err error) (*client.Client, func(), *trialUse, error) {
		done()
		return nil, nil, nil, err
	}
	base := c.BaseURL()
	path, err := configPath()
	if err != nil {
		return fail(&cliError{client.CodeInvalidRequest, err.Error()})
	}
	tu := &trialUse{path: path, baseURL: base}
	key, err := storedTrialKey(path, base)
	if err != nil {
		return fail(&cliError{client.CodeInvalidRequest, "reading the client configuration: " + err.Error()})
	}
	if key == "" && !obtain {
		return fail(&cliError{client.CodeUnauthorized, fmt.Sprintf(
			"%s is unset and no trial key is stored for %s in %s (\"withruntime sandbox create --trial\" obtains one)",
			client.EnvAPIKey, base, path)})
	}
	if key == "" {
		tr, err := c.Trial(ctx)
		if err != nil {
			var ae *client.APIError
			if errors.As(err, &ae) {
				return fail(&client.APIError{Code: ae.Code, Status: ae.Status,
					Message: fmt.Sprintf("obtaining a trial key from %s: %s", base, ae.Message)})
			}
			return fail(err)
		}
		if tr.Key == "" {
			return fail(&cliError{client.CodeInternal, base + " answered the trial request without a key"})
		}
		key, tu.fresh = tr.Key, true
		if err := storeTrialKey(path, base, key); err != nil {
			// The key still works for this command; the next one asks again.
			fmt.Fprintf(s.stderr, "warning: could not store the trial key: %v\n", err)
		}
	}
	tc, err := client.New(client.WithBaseURL(base), client.WithAPIKey(key), a.userAgent())
	if err != nil {
		return fail(err)
	}
	return tc, done, tu, nil
}

// refused handles a stored trial key the server no longer knows (its data
// was reset, say): it is forgotten, so that the next --trial obtains a new
// one, and the error says so.
func (tu *trialUse) refused(err error) error {
	var ae *client.APIError
	if tu == nil || tu.fresh || !errors.As(err, &ae) || ae.Code != client.CodeUnauthorized {
		return err
	}
	if storeTrialKey(tu.path, tu.baseURL, "") != nil {
		return err
	}
	return &client.APIError{Code: ae.Code, Status: ae.Status, Message: fmt.Sprintf(
		"%s (the trial key stored for %s was refused and is forgotten; run again with --trial for a new one)",
		ae.Message, tu.baseURL)}
}

// createSandbox connects as connectTrial does (obtaining a trial key for
// --trial) and creates the sandbox cf describes. done is called when the
// command is finished with the client.
func (a *App) createSandbox(ctx context.Context, s streams, cf *createFlags) (*client.Client, *api.Sandbox, func(), error) {
	c, done, tu, err := a.connectTrial(ctx, s, cf.trial, true)
	if err != nil {
		return nil, nil, nil, err
	}
	// Not canceled by Ctrl-C: a create cut short could leave a sandbox
	// nobody knows the id of. A second Ctrl-C still ends the program.
	sbx, err := c.CreateSandbox(context.WithoutCancel(ctx), cf.request())
	if err != nil {
		done()
		return nil, nil, nil, tu.refused(cf.timeout.refusal("--timeout", err))
	}
	return c, sbx, done, nil
}

func (a *App) userAgent() client.Option {
	return client.WithUserAgent("withruntime-cli/" + a.version())
}

// dial finds the server and says whether the key is the local daemon's
// admin key.
//
// The key is WITHRUNTIME_API_KEY; when unset, the local daemon's admin key
// on the default address (when this user can read it), else the trial key
// stored for the server by an earlier --trial.
//
// Without WITHRUNTIME_API_KEY, the default address is trusted only when
// every socket listening there belongs to the local daemon's user (the
// admin key file's owner, else this user), as the kernel says; another
// user's listener is refused with an error naming it, before any request,
// and no daemon is started over it. Every connection of the client dial
// returns is checked again (client.WithListenerOwner). Where the kernel
// cannot be asked (not Linux), no admin key is sent.
func (a *App) dial(ctx context.Context) (*client.Client, func(), bool, error) {
	noop := func() {}
	ua := a.userAgent()

	if base := os.Getenv(client.EnvBaseURL); base != "" {
		key, err := a.keyFor(base, "")
		if err != nil {
			return nil, nil, false, err
		}
		c, err := client.New(client.WithBaseURL(base), client.WithAPIKey(key), ua)
		if err != nil {
			return nil, nil, false, &cliError{client.CodeInvalidRequest, fmt.Sprintf("%s: %v", client.EnvBaseURL, err)}
		}
		return c, noop, false, nil
	}

	d, err := a.localDaemon()
	if err != nil {
		return nil, nil, false, &cliError{codeUnavailable, err.Error()}
	}
	userKey := os.Getenv(client.EnvAPIKey) != "" // the user chose: sent as before
	_, owner := d.adminKey()
	checked := false
	if !userKey {
		if checked, err = d.checkHolder(owner); err != nil {
			return nil, nil, false, err
		}
	}
	probe, err := client.New(client.WithBaseURL(d.url), client.WithAPIKey(""), ua)
	if err != nil {
		return nil, nil, false, err
	}
	if !d.answers(ctx, probe) {
		if ctx.Err() != nil {
			return nil, nil, false, ctx.Err()
		}
		if err := a.startDaemon(ctx, d, probe); err != nil {
			return nil, nil, false, err
		}
	}
	admin, owner := d.adminKey() // a daemon just started wrote it
	if checked {
		if _, err := d.checkHolder(owner); err != nil {
			return nil, nil, false, err
		}
	} else {
		admin = "" // who listens cannot be checked: the admin key stays here
	}
	key, err := a.keyFor(d.url, admin)
	if err != nil {
		return nil, nil, false, err
	}
	opts := []client.Option{client.WithBaseURL(d.url), client.WithAPIKey(key), ua}
	if checked {
		opts = append(opts, client.WithListenerOwner(owner))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, nil, false, err
	}
	return c, noop, key != "" && key == admin, nil
}

// keyFor returns the key for base: WITHRUNTIME_API_KEY, else admin (the
// local daemon's key, "" elsewhere), else the trial key stored for base.
func (a *App) keyFor(base, admin string) (string, error) {
	if key := os.Getenv(client.EnvAPIKey); key != "" {
		return key, nil
	}
	if admin != "" {
		return admin, nil
	}
	path, err := configPath()
	if err != nil {
		return "", nil // no configuration: no stored key
	}
	key, err := storedTrialKey(path, strings.TrimRight(base, "/"))
	if err != nil {
		return "", &cliError{client.CodeInvalidRequest, "reading the client configuration: " + err.Error()}
	}
	return key, nil
}
