package webhooks

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestDeliveryPostgresTwoServers: on the shared store of many hosts, two
// API servers' workers deliver one webhook's events in order, each once
// (the webhook's lock keeps the second away), and when the one delivering
// stops, the other takes over from the cursor.
func TestDeliveryPostgresTwoServers(t *testing.T) {
	ctx := context.Background()
	u := testenv.FreshPostgres(t, "withruntime_test_")
	open := func() *store.Postgres {
		st, err := store.OpenPostgres(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open(), open()
	rc := &receiver{t: t, secret: NewSecret(), tries: map[string]int{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	cfg := func(st store.Store) Config {
		return Config{Store: st, Checker: loopbackChecker(), MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Poll: 20 * time.Millisecond}
	}
	if err := a.PutWebhook(ctx, &store.Webhook{ID: "wh1", Account: "acct", URL: srv.URL, Events: Types, Secret: rc.secret, CreatedAt: time.Now()}, 20); err != nil {
		t.Fatal(err)
	}
	ca, stopA := context.WithCancel(ctx)
	doneA := make(chan struct{})
	go func() { NewWorker(cfg(a)).Run(ca); close(doneA) }()
	cb, stopB := context.WithCancel(ctx)
	defer stopB()
	go NewWorker(cfg(b)).Run(cb)

	a.SetEventSource(Source(nil))
	lifecycle(t, a, "acct", "sb1")
	waitFor(t, "4 deliveries", func() bool { return len(rc.received()) >= 4 })
	stopA()
	<-doneA
	b.SetEventSource(Source(nil))
	lifecycle(t, b, "acct", "sb2")
	waitFor(t, "8 deliveries", func() bool { return len(rc.received()) >= 8 })
	time.Sleep(200 * time.Millisecond)
	got := rc.received()
	want := []string{"sb1:" + SandboxCreated, "sb1:" + SandboxPaused, "sb1:" + SandboxResumed, "sb1:" + SandboxEnded,
		"sb2:" + SandboxCreated, "sb2:" + SandboxPaused, "sb2:" + SandboxResumed, "sb2:" + SandboxEnded}
	if len(got) != len(want) {
		t.Fatalf("%d deliveries, want %d (each once)", len(got), len(want))
	}
	for i, p := range got {
		var d SandboxData
		json.Unmarshal(p.Data, &d)
		if d.SandboxID+":"+p.Type != want[i] {
			t.Errorf("delivery %d: %s:%s, want %s", i, d.SandboxID, p.Type, want[i])
		}
	}
}
