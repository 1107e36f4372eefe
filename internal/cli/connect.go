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
	noop := func() {}
	key := os.Getenv(client.EnvAPIKey)
	ua := client.WithUserAgent("withruntime-cli/" + a.version())

	if base := os.Getenv(client.EnvBaseURL); base != "" {
		c, err := client.New(client.WithBaseURL(base), client.WithAPIKey(key), ua)
		if err != nil {
			return nil, nil, &cliError{client.CodeInvalidRequest, fmt.Sprintf("%s: %v", client.EnvBaseURL, err)}
		}
		return c, noop, nil
	}

	def := a.defaultBaseURL
	if def == "" {
		def = client.DefaultBaseURL
	}
	c, err := client.New(client.WithBaseURL(def), client.WithAPIKey(key), ua)
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	err = c.Health(pctx)
	cancel()
	var ae *client.APIError
	if err == nil || errors.As(err, &ae) {
		return c, noop, nil // something answers there: use it, errors and all
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}

	if a.Hooks.Embedded == nil {
		return nil, nil, &cliError{codeUnavailable, fmt.Sprintf(
			"nothing answers on %s and this build has no embedded server; run \"withruntime serve\" or set %s",
			def, client.EnvBaseURL)}
	}
	base, ekey, stop, err := a.Hooks.Embedded(ctx)
	if err != nil {
		if errors.As(err, &ae) {
			return nil, nil, err
		}
		return nil, nil, &cliError{codeUnavailable, fmt.Sprintf("starting the embedded server: %v", err)}
	}
	if stop == nil {
		stop = noop
	}
	c, err = client.New(client.WithBaseURL(base), client.WithAPIKey(ekey), ua)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("embedded server: %w", err)
	}
	return c, stop, nil
}
