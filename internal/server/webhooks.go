package server

import (
	"context"

	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/webhooks"
)

// hookService is the webhooks of a server that serves the API: the
// worker that delivers them, and the URL checker of --webhook-permit that
// registrations and deliveries share.
type hookService struct {
	checker *webhooks.Checker
	worker  *webhooks.Worker
}

func newHookService(cfg Config, st store.Store) *hookService {
	c := &webhooks.Checker{Permit: cfg.WebhookPermit}
	return &hookService{checker: c, worker: webhooks.NewWorker(webhooks.Config{Store: st, Checker: c, Log: cfg.Logger})}
}

// record makes what is written to st append the lifecycle events, in the
// writes' own transactions, waking the worker, and returns st.
func (h *hookService) record(st store.Store) store.Store {
	st.SetEventSource(webhooks.Source(h.worker.Kick))
	return st
}

// run delivers until stop is closed.
func (h *hookService) run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	go h.worker.Run(ctx)
}

// checkURL is httpapi.Config.CheckWebhookURL.
func (h *hookService) checkURL(ctx context.Context, u string) error {
	return h.checker.CheckURL(ctx, u)
}
