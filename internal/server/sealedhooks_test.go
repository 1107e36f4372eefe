package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/secrets"
	"github.com/withruntime/withruntime/internal/store"
)

// TestSealedHooks: a webhook's secret reaches the database sealed (not in
// its record, not in the database file), and comes back whole to the API
// and the worker; a record written before sealing still works.
func TestSealedHooks(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	vault, err := secrets.Open(filepath.Join(dir, "secrets.key"), st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := sealedHooks{Store: st, vault: vault}
	const secret = "whsec_c2VhbGVkLWhvb2tzLXRlc3Qtc2VjcmV0LXZhbHVlLTAx"
	w := &store.Webhook{ID: "wh_0000000000000001", Account: "acct", URL: "https://hooks.example.test/x", Events: []string{"sandbox.created"}, Secret: secret, CreatedAt: time.Now().UTC()}
	if err := s.PutWebhook(ctx, w, 10); err != nil {
		t.Fatal(err)
	}
	if w.Secret != secret {
		t.Fatal("PutWebhook changed its caller's record")
	}
	raw, err := st.GetWebhook(ctx, w.ID)
	if err != nil || strings.Contains(raw.Secret, "c2VhbGVk") || !strings.HasPrefix(raw.Secret, "sealed1:") {
		t.Fatalf("the stored secret: %q, %v", raw.Secret, err)
	}
	if got, err := s.GetWebhook(ctx, w.ID); err != nil || got.Secret != secret {
		t.Fatalf("GetWebhook: %+v, %v", got, err)
	}
	if list, err := s.ListWebhooks(ctx, ""); err != nil || len(list) != 1 || list[0].Secret != secret {
		t.Fatalf("ListWebhooks: %+v, %v", list, err)
	}
	old := &store.Webhook{ID: "wh_0000000000000002", Account: "acct", URL: "https://hooks.example.test/y", Events: []string{"sandbox.ended"}, Secret: "whsec_b2xk", CreatedAt: time.Now().UTC()}
	if err := st.PutWebhook(ctx, old, 10); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetWebhook(ctx, old.ID); err != nil || got.Secret != "whsec_b2xk" {
		t.Fatalf("a webhook stored before sealing: %+v, %v", got, err)
	}
	st.Close()
	data, _ := os.ReadFile(filepath.Join(dir, "db"))
	if bytes.Contains(data, []byte("c2VhbGVkLWhvb2tz")) {
		t.Fatal("the webhook's secret is in the database file")
	}
}
