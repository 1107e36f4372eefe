package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/withruntime/withruntime/client"
)

// codeUnavailable is the code printed when the server could not be reached
// or a stream broke: the API has no code for it, since the server did not
// answer.
const codeUnavailable = client.CodeUnavailable

// knownCodes are the codes this command line prints: SPEC.md's list, the
// server's and the client-side ones. Scripts match on them, so nothing
// else may appear after "error: ".
var knownCodes = map[string]bool{
	client.CodeInvalidRequest: true, client.CodeUnauthorized: true, client.CodeForbidden: true,
	client.CodeNotFound: true, client.CodeConflict: true, client.CodeLeaseEnded: true,
	client.CodePayloadTooLarge: true, client.CodeNotSupported: true, client.CodeMaxCostExceeded: true,
	client.CodeSpendingLimitReached: true, client.CodeTrialExhausted: true,
	client.CodeConcurrencyLimitReached: true, client.CodeRateLimited: true,
	client.CodeCapacityExhausted: true, client.CodeInternal: true, client.CodeBadGateway: true,
	client.CodeUnavailable: true, client.CodeCanceled: true,
}

// pausedRe finds the sandbox of the server's refusal to act on a paused
// sandbox ("cannot exec sandbox ID while it is paused").
var pausedRe = regexp.MustCompile(`sandbox (\S+) while it is paused`)

// cliError is a failure the command line itself detects, with the code to
// print.
type cliError struct {
	code, msg string
}

func (e *cliError) Error() string { return e.code + ": " + e.msg }

// errorCode returns the code and message printed for err. A code outside
// knownCodes (from a newer or a foreign server) is printed as internal,
// with the code it came with in the message.
func errorCode(err error) (code, msg string) {
	var ae *client.APIError
	var te *client.TransportError
	var ce *cliError
	switch {
	case errors.As(err, &ae):
		code, msg = ae.Code, ae.Message
		if code == client.CodeUnauthorized {
			msg = unauthorizedHint(msg)
		}
		if m := pausedRe.FindStringSubmatch(msg); code == client.CodeConflict && m != nil {
			msg += " (resume it with: withruntime sandbox resume " + m[1] + ")"
		}
	case errors.As(err, &te):
		code, msg = codeUnavailable, te.Error()
	case errors.As(err, &ce):
		code, msg = ce.code, ce.msg
	case errors.Is(err, context.Canceled):
		code, msg = client.CodeCanceled, "interrupted"
	default:
		code, msg = client.CodeInternal, err.Error()
	}
	if msg == "" {
		msg = strings.ReplaceAll(code, "_", " ")
	}
	if !knownCodes[code] {
		code, msg = client.CodeInternal, fmt.Sprintf("%s (code %q)", msg, code)
	}
	return code, msg
}

// report prints err as "error: CODE: message".
func report(w io.Writer, err error) {
	code, msg := errorCode(err)
	printError(w, code, msg)
}

func printError(w io.Writer, code, msg string) {
	if !knownCodes[code] {
		code, msg = client.CodeInternal, fmt.Sprintf("%s (code %q)", msg, code)
	}
	fmt.Fprintf(w, "error: %s: %s\n", code, msg)
}
