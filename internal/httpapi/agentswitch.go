package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
)

// The agent's answers reach the client through httputil.ReverseProxy,
// which relays informational answers (1xx) as they come and, on 101
// Switching Protocols, takes the client's connection over and copies both
// ways for as long as either side likes: something answering in the
// agent's place could hold API connections, spared from eviction, without
// end. No route of the agent's contract sends a 1xx or switches protocols,
// so none is asked for (a client's Upgrade, Connection and Expect headers
// never reach the agent) and any that comes ends the request as the
// agent's failure.

// errAgentSwitch is the error of an agent that answered with a 1xx.
var errAgentSwitch = errors.New("the sandbox's agent answered with an informational or protocol-switching status")

// askNoSwitch removes from h what asks the agent for a 1xx: an upgrade,
// or 100 Continue before the body.
func askNoSwitch(h http.Header) {
	for _, k := range []string{"Upgrade", "Connection", "Expect"} {
		h.Del(k)
	}
}

// refuseSwitch fails a round trip of ctx at the agent's first
// informational answer; the 101 that ends one is refused by
// checkNoSwitch.
func refuseSwitch(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			return fmt.Errorf("%w (%d)", errAgentSwitch, code)
		},
	})
}

// checkNoSwitch refuses an agent's answer that switches protocols.
func checkNoSwitch(resp *http.Response) error {
	if resp.StatusCode < 200 {
		return fmt.Errorf("%w (%d)", errAgentSwitch, resp.StatusCode)
	}
	return nil
}

// finalOnly is a ResponseWriter that sends no informational answer: the
// reverse proxy relays an agent's 1xx before the round trip hears of it.
type finalOnly struct{ http.ResponseWriter }

func (w finalOnly) WriteHeader(code int) {
	if code >= 200 {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w finalOnly) Unwrap() http.ResponseWriter { return w.ResponseWriter }
