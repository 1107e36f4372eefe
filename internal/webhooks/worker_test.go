package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// receiver is a webhook endpoint that refuses the first fail tries of each
// message and records the rest, verifying every signature.
type receiver struct {
	t      *testing.T
	secret string
	fail   int

	mu    sync.Mutex
	tries map[string]int
	got   []Payload
	bad   int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id, ts, sig := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !verifyIndependently(rc.t, rc.secret, id, ts, sig, body) {
		rc.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rc.tries[id]++
	if rc.tries[id] <= rc.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil || p.ID != id {
		rc.bad++
	}
	rc.got = append(rc.got, p)
}

func (rc *receiver) received() []Payload {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Payload(nil), rc.got...)
}

func loopbackChecker() *Checker {
	return &Checker{Permit: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lifecycle drives a sandbox record through created, paused, resumed and
// ended in st, as the manager writes them.
func lifecycle(t *testing.T, st store.Store, account, id string) {
	t.Helper()
	ctx := context.Background()
	r := &sandbox.Record{ID: id, Account: account, State: sandbox.StateStarting, Spec: sandbox.Spec{Image: "default"}}
	if err := st.AdmitSandbox(ctx, r, 0); err != nil {
		t.Fatal(err)
	}
	step := func(s sandbox.State, change func(*sandbox.Record)) {
		n := *r
		n.State = s
		if change != nil {
			change(&n)
		}
		if err := st.PutSandbox(ctx, &n); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		r = &n
	}
	now := time.Now()
	step(sandbox.StateRunning, nil)
	step(sandbox.StateRunning, func(r *sandbox.Record) { r.Usage.AliveMs = 5 }) // a meter write: no event
	step(sandbox.StatePaused, func(r *sandbox.Record) { r.PausedAt = &now })
	step(sandbox.StateStarting, nil)
	step(sandbox.StateRunning, func(r *sandbox.Record) { r.PausedAt = nil })
	step(sandbox.StateEnded, func(r *sandbox.Record) { r.EndReason = sandbox.EndStopped; r.Usage.CostNanos = 42_000 })
}

// TestDeliveryOrderRetries: a receiver that refuses each message twice
// gets every event of two sandboxes, in order, signed, after retries; the
// delivery log says how many tries each took.
func TestDeliveryOrderRetries(t *testing.T) {
	base := storetest.OpenBolt(t)
	w := NewWorker(Config{Store: base, Checker: loopbackChecker(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Poll: 50 * time.Millisecond})
	base.SetEventSource(Source(w.Kick))
	st := base
	rc := &receiver{t: t, secret: NewSecret(), fail: 2, tries: map[string]int{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hook := &store.Webhook{ID: "wh1", Account: "acct", URL: srv.URL, Events: []string{SandboxCreated, SandboxPaused, SandboxResumed, SandboxEnded}, Secret: rc.secret, CreatedAt: time.Now()}
	if err := st.PutWebhook(ctx, hook, 20); err != nil {
		t.Fatal(err)
	}
	go w.Run(ctx)
	lifecycle(t, st, "acct", "sb1")
	lifecycle(t, st, "other", "sb9") // another account's: never sent here
	lifecycle(t, st, "acct", "sb2")
	waitFor(t, "8 deliveries", func() bool { return len(rc.received()) >= 8 })
	// Each is logged once the receiver answered it.
	waitFor(t, "8 deliveries logged", func() bool {
		ds, _ := base.ListDeliveries(ctx, "wh1", 100)
		return len(ds) >= 8
	})
	time.Sleep(100 * time.Millisecond)
	got := rc.received()
	want := []string{"sb1:" + SandboxCreated, "sb1:" + SandboxPaused, "sb1:" + SandboxResumed, "sb1:" + SandboxEnded,
		"sb2:" + SandboxCreated, "sb2:" + SandboxPaused, "sb2:" + SandboxResumed, "sb2:" + SandboxEnded}
	if len(got) != len(want) {
		t.Fatalf("got %d deliveries, want %d: %+v", len(got), len(want), got)
	}
	for i, p := range got {
		var d SandboxData
		json.Unmarshal(p.Data, &d)
		if d.SandboxID+":"+p.Type != want[i] {
			t.Errorf("delivery %d: %s:%s, want %s", i, d.SandboxID, p.Type, want[i])
		}
		if p.Type == SandboxEnded && (d.EndReason != "stopped" || d.CostMicros == nil || *d.CostMicros != 42) {
			t.Errorf("ended payload %s: want end_reason stopped and cost_micros 42", p.Data)
		}
	}
	if rc.bad != 0 {
		t.Errorf("%d deliveries did not verify", rc.bad)
	}
	ds, err := base.ListDeliveries(ctx, "wh1", 100)
	if err != nil || len(ds) != 8 {
		t.Fatalf("delivery log: %d, %v", len(ds), err)
	}
	for _, d := range ds {
		if d.Status != store.DeliveryDelivered || d.Attempts != 3 || d.HTTPCode != 200 {
			t.Errorf("delivery %+v: want delivered after 3 tries", d)
		}
	}
	// Another account's events move the cursor past them, unsent.
	other := &store.Event{Account: "other", Type: SandboxCreated, Subject: "sb8"}
	if err := st.AppendEvent(ctx, other); err != nil {
		t.Fatal(err)
	}
	w.Kick()
	waitFor(t, "the cursor past another account's event", func() bool {
		h, err := base.GetWebhook(ctx, "wh1")
		return err == nil && h.Cursor == other.Seq
	})
	if n := len(rc.received()); n != 8 {
		t.Errorf("%d deliveries, want still 8", n)
	}
}

// TestDeliveryFailsThenGoesOn: a message refused more often than
// MaxAttempts is logged failed, and the next one is delivered.
func TestDeliveryFailsThenGoesOn(t *testing.T) {
	base := storetest.OpenBolt(t)
	w := NewWorker(Config{Store: base, Checker: loopbackChecker(), MaxAttempts: 3, MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Poll: 50 * time.Millisecond})
	rc := &receiver{t: t, secret: NewSecret(), tries: map[string]int{}}
	var mu sync.Mutex
	first := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		refuse := first && r.Header.Get("webhook-id") == MessageID(1)
		mu.Unlock()
		if refuse {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		rc.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := base.PutWebhook(ctx, &store.Webhook{ID: "wh1", Account: "a", URL: srv.URL, Events: []string{TemplateBuilt}, Secret: rc.secret, CreatedAt: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := base.AppendEvent(ctx, &store.Event{Account: "a", Type: TemplateBuilt, Subject: "t", Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	go w.Run(ctx)
	// The worker logs a delivery once the receiver has answered: the log
	// is waited for, not only the receiver.
	var ds []store.Delivery
	waitFor(t, "the second event delivered and logged", func() bool {
		ds, _ = base.ListDeliveries(ctx, "wh1", 10)
		return len(rc.received()) == 1 && len(ds) == 2 && ds[0].Status == store.DeliveryDelivered
	})
	if len(ds) != 2 || ds[1].Status != store.DeliveryFailed || ds[1].Attempts != 3 || ds[1].HTTPCode != 500 || ds[0].Status != store.DeliveryDelivered {
		t.Fatalf("delivery log %+v: want the first failed after 3 tries, the second delivered", ds)
	}
	if got := rc.received()[0].ID; got != MessageID(2) {
		t.Fatalf("delivered %s, want %s", got, MessageID(2))
	}
}

// TestDeliveryResumesFromCursor: events appended while no worker runs, or
// while the receiver refuses them and the worker is stopped, are delivered
// by the next worker on the same store; none twice once acknowledged.
func TestDeliveryResumesFromCursor(t *testing.T) {
	base := storetest.OpenBolt(t)
	rc := &receiver{t: t, secret: NewSecret(), fail: 1 << 30, tries: map[string]int{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	cfg := Config{Store: base, Checker: loopbackChecker(), MaxAttempts: 1000, MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Poll: 20 * time.Millisecond}
	ctx := context.Background()
	if err := base.PutWebhook(ctx, &store.Webhook{ID: "wh1", Account: "a", URL: srv.URL, Events: []string{SandboxCreated}, Secret: rc.secret, CreatedAt: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		base.AppendEvent(ctx, &store.Event{Account: "a", Type: SandboxCreated, Subject: "s", Data: []byte(`{}`)})
	}
	c1, stop1 := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { NewWorker(cfg).Run(c1); close(done) }()
	waitFor(t, "refused tries", func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return rc.tries[MessageID(1)] > 3 })
	stop1()
	<-done
	rc.mu.Lock()
	rc.fail = 0
	rc.mu.Unlock()
	c2, stop2 := context.WithCancel(ctx)
	defer stop2()
	go NewWorker(cfg).Run(c2)
	waitFor(t, "3 deliveries", func() bool { return len(rc.received()) == 3 })
	for i, p := range rc.received() {
		if p.ID != MessageID(int64(i+1)) {
			t.Errorf("delivery %d is %s", i, p.ID)
		}
	}
	if h, _ := base.GetWebhook(ctx, "wh1"); h.Cursor != 3 {
		t.Errorf("cursor %d, want 3", h.Cursor)
	}
}

// TestNoRedirects: a 3xx answer is not followed (it could point anywhere)
// and counts as a failure.
func TestNoRedirects(t *testing.T) {
	var followed bool
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed = true }))
	defer target.Close()
	srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer srv.Close()
	w := NewWorker(Config{Checker: loopbackChecker()})
	code, err := w.try(context.Background(), &store.Webhook{URL: srv.URL, Secret: NewSecret()}, "evt_1", []byte(`{}`))
	if err == nil || code != http.StatusTemporaryRedirect || followed {
		t.Fatalf("redirect: code %d, err %v, followed %v", code, err, followed)
	}
}
