package e2bcompat

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/membudget"
)

// What the layer holds of a sandbox's answers is reserved in
// Config.Memory, the server's budget of agents' answers, against the
// request's account and sandbox: the JSON answers and event lines its
// in-process client reads (the client reserves them through the
// Sandbox's client, set in ServeHTTP) and the cell lines /execute has in
// flight. A refusal is rate_limited (429; Connect resource_exhausted)
// past the sandbox's or account's share, capacity_exhausted (503;
// Connect unavailable) past the server's total.

// reserveFor is the ReserveFunc of the sandbox-side client of account.
func (s *Server) reserveFor(account string) client.ReserveFunc {
	return func(_ context.Context, id string, n int64) (func(), error) {
		release, err := s.cfg.Memory.Acquire(account, id, n)
		if err != nil {
			return nil, budgetError(err)
		}
		return release, nil
	}
}

// budgetError is a refused reservation as withruntime's error.
func budgetError(err error) error {
	var e *membudget.Error
	if !errors.As(err, &e) {
		return err
	}
	if e.Level == membudget.LevelServer {
		return &client.APIError{Code: client.CodeCapacityExhausted, Status: http.StatusServiceUnavailable,
			Message: fmt.Sprintf("the server holds all the answers of sandboxes it can (%d MiB): retry later", e.Limit>>20)}
	}
	return &client.APIError{Code: client.CodeRateLimited, Status: http.StatusTooManyRequests,
		Message: fmt.Sprintf("the %s's requests in progress hold all the memory of sandbox answers they may (%d MiB): retry once some end", e.Level, e.Limit>>20)}
}
