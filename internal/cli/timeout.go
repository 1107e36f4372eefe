package cli

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/client"
)

// leaseRefusedRe matches the server's refusal of a lease longer than it
// allows (serve --max-lease, 24 hours by default), in the API's terms.
var leaseRefusedRe = regexp.MustCompile(`^timeout_seconds must be between 1 and (\d+), got -?\d+$`)

// refusal puts the server's refusal of the lease given with flag in the
// flag's terms: "--timeout must be between 1s and 24h0m0s, not 48h", not
// "timeout_seconds must be between 1 and 86400". The bound is the
// server's own, which an operator may have changed, so the command line
// does not check it before asking. Any other error is returned as it is.
func (v *durationValue) refusal(flag string, err error) error {
	var ae *client.APIError
	if v.d == 0 || !errors.As(err, &ae) || ae.Code != client.CodeInvalidRequest {
		return err
	}
	msg := ""
	if m := leaseRefusedRe.FindStringSubmatch(ae.Message); m != nil {
		limit, perr := strconv.ParseInt(m[1], 10, 64)
		if perr != nil || limit > int64(time.Duration(1<<63-1)/time.Second) {
			return err
		}
		msg = fmt.Sprintf("%s must be between 1s and %s, not %s", flag, time.Duration(limit)*time.Second, v.raw)
	} else if ae.Message == "timeout_seconds is too large" {
		msg = fmt.Sprintf("%s %s is too large", flag, v.raw)
	} else {
		return err
	}
	return &client.APIError{Code: ae.Code, Status: ae.Status, Message: msg}
}
