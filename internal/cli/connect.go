package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/withruntime/withruntime/client"
)

// probeTimeout bounds the check for a server on the default address.
const probeTimeout = 300 * time.Millisecond

// connect returns a client of the server the command talks to, and what to
// call when the command is done.
//
// WITHRUNTIME_BASE_URL set (and not empty): that server, with no check and
// no fallback; if it does not answer, the command fails. Unset: the default
// address when something answers GET /v1/health there within 300ms,
// otherwise the embedded server from Hooks.Embedded.
func (a *App) connect(ctx context.Context) (*client.Client, func(), error) {
	c, done, _, err := a.dial(ctx)
	return c, done, err
}

// connectCreate is connect for commands that create a sandbox. --trial
// changes nothing on the embedded default (its owner is the only user);
// a server is asked for a trial key only once trial accounts exist, and
// until then the flag is refused rather than ignored.
func (a *App) connectCreate(ctx context.Context, cf *createFlags) (*client.Client, func(), error) {
	c, done, embedded, err := a.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	if cf.trial && !embedded {
		done()
		return nil, nil, &cliError{client.CodeNotSupported, "trial accounts are not offered by this server yet; use an API key"}
	}
	return c, done, nil
}

// dial finds the server and says whether it is the embedded default.
func (a *App) dial(ctx context.Context) (*client.Client, func(), bool, error) {
	noop := func() {}
	key := os.Getenv(client.EnvAPIKey)
	ua := client.WithUserAgent("withruntime-cli/" + a.version())

	if base := os.Getenv(client.EnvBaseURL); base != "" {
		c, err := client.New(client.WithBaseURL(base), client.WithAPIKey(key), ua)
		if err != nil {
			return nil, nil, false, &cliError{client.CodeInvalidRequest, fmt.Sprintf("%s: %v", client.EnvBaseURL, err)}
		}
		return c, noop, false, nil
	}

	def := a.defaultBaseURL
	if def == "" {
		def = client.DefaultBaseURL
	}
	c, err := client.New(client.WithBaseURL(def), client.WithAPIKey(key), ua)
	if err != nil {
		return nil, nil, false, err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	err = c.Health(pctx)
	cancel()
	var ae *client.APIError
	if err == nil || errors.As(err, &ae) {
		return c, noop, false, nil // something answers there: use it, errors and all
	}
	if ctx.Err() != nil {
		return nil, nil, false, ctx.Err()
	}

	if a.Hooks.Embedded == nil {
		return nil, nil, false, &cliError{codeUnavailable, fmt.Sprintf(
			"nothing answers on %s and this build has no embedded server; run \"withruntime serve\" or set %s",
			def, client.EnvBaseURL)}
	}
	base, ekey, stop, err := a.Hooks.Embedded(ctx)
	if err != nil {
		if errors.As(err, &ae) {
			return nil, nil, false, err
		}
		return nil, nil, false, &cliError{codeUnavailable, fmt.Sprintf("starting the embedded server: %v", err)}
	}
	if stop == nil {
		stop = noop
	}
	c, err = client.New(client.WithBaseURL(base), client.WithAPIKey(ekey), ua)
	if err != nil {
		stop()
		return nil, nil, false, fmt.Errorf("embedded server: %w", err)
	}
	return c, stop, true, nil
}
