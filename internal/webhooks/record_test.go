package webhooks

import (
	"context"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
	"github.com/withruntime/withruntime/internal/template"
)

// TestSource: state changes append their events, writes that change no
// state (the meter's) and writes the store refuses append none, and a
// template insert appends template.built; notify hears each.
func TestSource(t *testing.T) {
	ctx := context.Background()
	base := storetest.OpenBolt(t)
	kicks := 0
	base.SetEventSource(Source(func() { kicks++ }))
	st := base
	lifecycle(t, st, "a", "sb1")
	// A stale write: refused, no event.
	stale := &sandbox.Record{ID: "sb1", Account: "a", State: sandbox.StatePaused, Version: 1}
	if err := st.PutSandbox(ctx, stale); err == nil {
		t.Fatal("a stale write was taken")
	}
	tpl := &template.Template{ID: "tpl_1", Account: "a", Name: "app", Tag: "latest", Layers: []string{}}
	if err := st.PutTemplate(ctx, tpl, store.TemplateQuota{}); err != nil {
		t.Fatal(err)
	}
	events, err := base.ListEvents(ctx, "a", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		got = append(got, e.Subject+":"+e.Type)
	}
	want := []string{"sb1:" + SandboxCreated, "sb1:" + SandboxPaused, "sb1:" + SandboxResumed, "sb1:" + SandboxEnded, "tpl_1:" + TemplateBuilt}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %s, want %s", i, got[i], want[i])
		}
	}
	if kicks != len(want) {
		t.Errorf("notify heard %d events, want %d", kicks, len(want))
	}
}
