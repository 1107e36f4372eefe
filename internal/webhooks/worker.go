package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/backoff"
	"github.com/withruntime/withruntime/internal/store"
)

// Store is what the worker reads and writes of internal/store.
type Store interface {
	ListEvents(ctx context.Context, account string, after int64, limit int) ([]store.Event, error)
	LastEventSeq(ctx context.Context) (int64, error)
	ListWebhooks(ctx context.Context, account string) ([]store.Webhook, error)
	GetWebhook(ctx context.Context, id string) (*store.Webhook, error)
	AdvanceWebhook(ctx context.Context, id string, seq int64, d *store.Delivery) error
	PruneEvents(ctx context.Context, before, auditBefore time.Time) (int, int, error)
	TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error)
}

// Defaults of Config.
const (
	DefaultMaxAttempts    = 8
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultTimeout        = 10 * time.Second
	DefaultPoll           = 2 * time.Second
	DefaultEventRetention = 7 * 24 * time.Hour
	DefaultAuditRetention = 90 * 24 * time.Hour
	DefaultMaxPerAccount  = 20
	maxResponseBody       = 64 << 10
	batch                 = 100
	pruneEvery            = time.Hour
)

// Config is a Worker's settings; zero fields take the defaults.
type Config struct {
	Store   Store
	Checker *Checker
	Log     *slog.Logger
	// MaxAttempts bounds the tries of one delivery; after the last it is
	// logged failed and the webhook goes on with the next event.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait between tries, which
	// doubles from MinBackoff, with up to half of it added at random.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one try, from dial to the end of the response.
	Timeout time.Duration
	// Poll is how often the worker looks for new webhooks and events
	// without being woken (Kick).
	Poll time.Duration
	// EventRetention and AuditRetention are how long events and audit
	// entries are kept.
	EventRetention, AuditRetention time.Duration
}

// Worker delivers the webhooks' events (see the package doc).
type Worker struct {
	cfg    Config
	client *http.Client
	kick   chan struct{}

	mu      sync.Mutex
	running map[string]chan struct{} // webhook id: its loop's wake-up
}

// NewWorker returns a worker; Run starts it.
func NewWorker(cfg Config) *Worker {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	def(&cfg.MinBackoff, DefaultMinBackoff)
	def(&cfg.MaxBackoff, DefaultMaxBackoff)
	def(&cfg.Timeout, DefaultTimeout)
	def(&cfg.Poll, DefaultPoll)
	def(&cfg.EventRetention, DefaultEventRetention)
	def(&cfg.AuditRetention, DefaultAuditRetention)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Checker == nil {
		cfg.Checker = &Checker{}
	}
	return &Worker{cfg: cfg, client: NewClient(cfg.Checker, cfg.Timeout), kick: make(chan struct{}, 1), running: map[string]chan struct{}{}}
}

// NewClient is the HTTP client of deliveries: no proxy, no redirects
// followed, every dial held to c, and timeouts.
func NewClient(c *Checker, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout, Control: c.control}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           d.DialContext,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConns:          16,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Kick wakes the worker: an event was appended.
func (w *Worker) Kick() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends. Only the process holding the
// installation-wide lock "webhooks" delivers, so that the API servers of
// many hosts on one store do not each send every event; the others wait
// to take it over. (One lock, not one per webhook: a lock holds a store
// connection while it is held.)
func (w *Worker) Run(ctx context.Context) {
	var unlock func()
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(w.cfg.Poll)
	defer t.Stop()
	lastPrune := time.Time{}
	for {
		if unlock == nil {
			if u, ok, err := w.cfg.Store.TryLock(ctx, "webhooks"); err == nil && ok {
				unlock = u
			} else if err != nil && ctx.Err() == nil {
				w.cfg.Log.Warn("taking the webhooks' lock", "error", err)
			}
		}
		if unlock != nil {
			if time.Since(lastPrune) > pruneEvery {
				lastPrune = time.Now()
				w.prune(ctx)
			}
			w.sync(ctx, &wg)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.kick:
		}
	}
}

func (w *Worker) prune(ctx context.Context) {
	now := time.Now()
	ne, na, err := w.cfg.Store.PruneEvents(ctx, now.Add(-w.cfg.EventRetention), now.Add(-w.cfg.AuditRetention))
	if err != nil {
		w.cfg.Log.Warn("pruning webhook events and audit entries", "error", err)
	} else if ne+na > 0 {
		w.cfg.Log.Info("pruned webhook events and audit entries", "events", ne, "audit", na)
	}
}

// sync starts a loop for each webhook that has none, and wakes the others.
func (w *Worker) sync(ctx context.Context, wg *sync.WaitGroup) {
	hooks, err := w.cfg.Store.ListWebhooks(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Log.Warn("listing webhooks", "error", err)
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hooks {
		if wake, ok := w.running[h.ID]; ok {
			select {
			case wake <- struct{}{}:
			default:
			}
			continue
		}
		wake := make(chan struct{}, 1)
		w.running[h.ID] = wake
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			w.loop(ctx, id, wake)
			w.mu.Lock()
			delete(w.running, id)
			w.mu.Unlock()
		}(h.ID)
	}
}

// loop delivers webhook id's events while it exists.
func (w *Worker) loop(ctx context.Context, id string, wake chan struct{}) {
	for {
		h, err := w.cfg.Store.GetWebhook(ctx, id)
		if err != nil {
			return // removed (or the store failed: sync starts it again)
		}
		more, err := w.drain(ctx, h)
		if err != nil {
			if ctx.Err() == nil {
				w.cfg.Log.Warn("delivering webhook events", "webhook", id, "error", err)
			}
			return
		}
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}

// drain delivers a batch of h's events after its cursor, and reports
// whether there may be more. When the batch was the last, the cursor moves
// on to the last event of any account seen before it was read: every
// event up to that one was visible then (the log's Seq order is its commit
// order), so none of h's is skipped, and the next drain does not read the
// other accounts' events again.
func (w *Worker) drain(ctx context.Context, h *store.Webhook) (bool, error) {
	last, err := w.cfg.Store.LastEventSeq(ctx)
	if err != nil {
		return false, err
	}
	events, err := w.cfg.Store.ListEvents(ctx, h.Account, h.Cursor, batch)
	if err != nil {
		return false, err
	}
	for _, e := range events {
		if !h.Wants(e.Type) {
			if err := w.cfg.Store.AdvanceWebhook(ctx, h.ID, e.Seq, nil); err != nil {
				return false, err
			}
			continue
		}
		d, err := w.deliver(ctx, h, e)
		if err != nil {
			return false, err // ctx ended, or the webhook is gone
		}
		if err := w.cfg.Store.AdvanceWebhook(context.WithoutCancel(ctx), h.ID, e.Seq, d); err != nil {
			return false, err
		}
	}
	if len(events) == batch {
		return true, nil
	}
	if last > h.Cursor && (len(events) == 0 || last > events[len(events)-1].Seq) {
		return false, w.cfg.Store.AdvanceWebhook(ctx, h.ID, last, nil)
	}
	return false, nil
}

// Payload is the body of a delivery.
type Payload struct {
	// ID is the message's id, the webhook-id header: the same on every
	// try, so a receiver can drop repeats.
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// MessageID is the webhook-id of event seq.
func MessageID(seq int64) string { return "evt_" + strconv.FormatInt(seq, 10) }

// deliver tries e until it is accepted or MaxAttempts ran out, and returns
// what to log. Its error is only ctx's, or the webhook's removal.
func (w *Worker) deliver(ctx context.Context, h *store.Webhook, e store.Event) (*store.Delivery, error) {
	body, err := json.Marshal(Payload{ID: MessageID(e.Seq), Type: e.Type, CreatedAt: e.At, Data: e.Data})
	if err != nil {
		return nil, err
	}
	d := &store.Delivery{EventSeq: e.Seq, EventType: e.Type, Subject: e.Subject}
	var base time.Duration
	for d.Attempts < w.cfg.MaxAttempts {
		if d.Attempts > 0 {
			base = backoff.Next(base, w.cfg.MinBackoff, w.cfg.MaxBackoff)
			t := time.NewTimer(jitter(base))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			// A webhook removed meanwhile is not tried again.
			if _, err := w.cfg.Store.GetWebhook(ctx, h.ID); err != nil {
				return nil, err
			}
		}
		d.Attempts++
		code, err := w.try(ctx, h, MessageID(e.Seq), body)
		d.HTTPCode, d.At = code, time.Now().UTC()
		if err == nil {
			d.Status, d.Error = store.DeliveryDelivered, ""
			return d, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		d.Error = err.Error()
		if len(d.Error) > 500 {
			d.Error = d.Error[:500]
		}
	}
	d.Status = store.DeliveryFailed
	w.cfg.Log.Warn("webhook delivery failed", "webhook", h.ID, "event", e.Seq, "type", e.Type, "attempts", d.Attempts, "error", d.Error)
	return d, nil
}

// jitter adds up to half of d at random, so that many failing receivers
// are not tried in step.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/2+1))
}

// try sends one delivery; a 2xx answer is success.
func (w *Worker) try(ctx context.Context, h *store.Webhook, id string, body []byte) (int, error) {
	ts := time.Now()
	sig, err := Sign(h.Secret, id, ts, body)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "withruntime-webhooks")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	resp, err := w.client.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap()
		}
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}
