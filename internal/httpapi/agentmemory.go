package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/membudget"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
)

// The memory the server holds of agents' answers is bounded in sum by
// Config.AgentMemory: the lines a stream's guard holds back (execstream.go)
// and what the in-process MCP tools read whole (mcp.go) are reserved
// against the caller's account and the sandbox before they are held. A
// reservation past a sandbox's or an account's share is rate_limited
// (429: the caller's own requests hold it, and end); past the server's
// total it is capacity_exhausted (503).

// budgetError is a refused reservation as an error of the API's kinds.
func budgetError(err error) error {
	var e *membudget.Error
	if !errors.As(err, &e) {
		return err
	}
	what := "the sandbox's"
	switch e.Level {
	case membudget.LevelAccount:
		what = "the account's"
	case membudget.LevelServer:
		return sandbox.Wrap(sandbox.KindCapacityExhausted, err, fmt.Sprintf("the server holds all the answers of sandboxes it can (%d MiB): retry later", e.Limit>>20))
	}
	return sandbox.Wrap(sandbox.KindRateLimited, err, fmt.Sprintf("%s requests in progress hold all the memory of sandbox answers they may (%d MiB): retry once some end", what, e.Limit>>20))
}

// reserveFor is the ReserveFunc of an in-process client acting for
// account: refusals are the API's own errors, as a direct request would
// get them.
func (s *server) reserveFor(account string) client.ReserveFunc {
	return func(_ context.Context, id string, n int64) (func(), error) {
		release, err := s.cfg.AgentMemory.Acquire(account, id, n)
		if err != nil {
			d := ErrorDetail(budgetError(err))
			return nil, &client.APIError{Code: d.Code, Status: service.Status(sandbox.Kind(d.Code)), Message: d.Message}
		}
		return release, nil
	}
}
