package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// hookReceiver is a webhook endpoint on loopback. It verifies each
// delivery's Standard Webhooks signature with its own code (nothing of
// the server's), and refuses every delivery with 503 while refuse is set.
type hookReceiver struct {
	secret  atomic.Value // string
	refuse  atomic.Bool
	refused atomic.Int32

	mu  sync.Mutex
	got []hookDelivery
	bad []string
}

type hookDelivery struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	SandboxID string
	Data      struct {
		SandboxID  string `json:"sandbox_id"`
		EndReason  string `json:"end_reason"`
		CostMicros *int64 `json:"cost_micros"`
	} `json:"data"`
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if h.refuse.Load() {
		h.refused.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	secret, _ := h.secret.Load().(string)
	id, ts, sigs := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := false
	for _, s := range strings.Fields(sigs) {
		ok = ok || hmac.Equal([]byte(s), []byte(want))
	}
	var d hookDelivery
	if err := json.Unmarshal(body, &d); err != nil || !ok || d.ID != id {
		h.bad = append(h.bad, fmt.Sprintf("id %q sig %q body %s", id, sigs, body))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	h.got = append(h.got, d)
}

func (h *hookReceiver) deliveries() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.got...)
}

// types is each delivery as "sandbox:type", from index from on.
func types(ds []hookDelivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Data.SandboxID+":"+d.Type)
	}
	return out
}

// TestWebhooks: a webhook on loopback (permitted with --webhook-permit)
// hears a sandbox's created, paused, resumed and ended, in order, signed;
// events appended while the receiver refuses them and the server is then
// killed (-9) are delivered by the restarted server; metadata and private
// addresses stay refused; every change is in the audit log.
func TestWebhooks(t *testing.T) {
	s := testenv.StartServer(t, "--webhook-permit", "127.0.0.0/8")
	rc := &hookReceiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()

	for _, u := range []string{"http://169.254.169.254/latest", "http://10.0.0.1/", "http://[::1]:9/"} {
		status, data := call(t, s, s.Key, "POST", "/v1/webhooks", strings.NewReader(`{"url":"`+u+`","events":["sandbox.created"]}`))
		if status != 400 || !strings.Contains(string(data), "invalid_request") {
			t.Errorf("webhook to %s: %d %s, want 400 invalid_request", u, status, data)
		}
	}
	status, data := call(t, s, s.Key, "POST", "/v1/webhooks", strings.NewReader(`{"url":"`+srv.URL+`/hook","events":["sandbox.created","sandbox.paused","sandbox.resumed","sandbox.ended"]}`))
	var wh api.Webhook
	if status != 201 || json.Unmarshal(data, &wh) != nil || !strings.HasPrefix(wh.Secret, "whsec_") {
		t.Fatalf("POST /v1/webhooks: %d %s", status, data)
	}
	rc.secret.Store(wh.Secret)

	do := func(method, path, body string) api.Sandbox {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		status, data := call(t, s, s.Key, method, path, r)
		var sb api.Sandbox
		if status >= 300 || json.Unmarshal(data, &sb) != nil {
			t.Fatalf("%s %s: %d %s", method, path, status, data)
		}
		return sb
	}
	waitFor := func(what string, n int) []hookDelivery {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for len(rc.deliveries()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: got %v\n%s", what, types(rc.deliveries()), s.Log)
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // nothing more than asked for
		return rc.deliveries()
	}

	sb := do("POST", "/v1/sandboxes", `{"vcpus":1,"memory_mib":512}`)
	do("POST", "/v1/sandboxes/"+sb.ID+"/pause", "")
	do("POST", "/v1/sandboxes/"+sb.ID+"/resume", "")
	do("POST", "/v1/sandboxes/"+sb.ID+"/stop", "")
	got := waitFor("the first sandbox's events", 4)
	want := []string{sb.ID + ":sandbox.created", sb.ID + ":sandbox.paused", sb.ID + ":sandbox.resumed", sb.ID + ":sandbox.ended"}
	if fmt.Sprint(types(got)) != fmt.Sprint(want) {
		t.Fatalf("deliveries %v, want %v", types(got), want)
	}
	if end := got[3].Data; end.EndReason != "stopped" || end.CostMicros == nil {
		t.Errorf("sandbox.ended: %+v, want end_reason stopped and a cost", end)
	}

	// The receiver goes down; a sandbox lives and ends meanwhile; the
	// server is killed while it retries, and comes back on its data dir.
	rc.refuse.Store(true)
	sb2 := do("POST", "/v1/sandboxes", `{"vcpus":1,"memory_mib":512}`)
	do("POST", "/v1/sandboxes/"+sb2.ID+"/stop", "")
	deadline := time.Now().Add(30 * time.Second)
	for rc.refused.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no delivery tried while the receiver refused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop(true)
	rc.refuse.Store(false)
	s.Start()
	got = waitFor("the second sandbox's events after the restart", 6)
	want = append(want, sb2.ID+":sandbox.created", sb2.ID+":sandbox.ended")
	if fmt.Sprint(types(got)) != fmt.Sprint(want) {
		t.Fatalf("after kill -9 and restart: deliveries %v, want %v", types(got), want)
	}
	rc.mu.Lock()
	if len(rc.bad) > 0 {
		t.Errorf("deliveries that did not verify: %v", rc.bad)
	}
	rc.mu.Unlock()

	// The delivery log.
	status, data = call(t, s, s.Key, "GET", "/v1/webhooks", nil)
	var list api.WebhookList
	if status != 200 || json.Unmarshal(data, &list) != nil || len(list.Webhooks) != 1 || strings.Contains(string(data), "whsec_") {
		t.Fatalf("GET /v1/webhooks: %d %s", status, data)
	}
	if ds := list.Webhooks[0].Deliveries; len(ds) != 6 || ds[0].Status != "delivered" || ds[0].Subject != sb2.ID || ds[0].EventType != "sandbox.ended" {
		t.Errorf("delivery log: %+v, want 6 delivered, the newest first", ds)
	}

	// The audit log: one entry per change, by the admin key, from loopback.
	status, data = call(t, s, s.Key, "GET", "/v1/audit", nil)
	var audit api.AuditLog
	if status != 200 || json.Unmarshal(data, &audit) != nil {
		t.Fatalf("GET /v1/audit: %d %s", status, data)
	}
	var actions []string
	for _, a := range audit.Entries {
		actions = append(actions, a.Action+":"+a.Target)
		if a.KeyID == "" || a.Remote != "127.0.0.1" || a.Account == "" {
			t.Errorf("audit entry %+v: want the key, account and client address", a)
		}
	}
	wantAudit := []string{"webhook.create:" + wh.ID, "sandbox.create:" + sb.ID, "sandbox.pause:" + sb.ID, "sandbox.resume:" + sb.ID, "sandbox.stop:" + sb.ID, "sandbox.create:" + sb2.ID, "sandbox.stop:" + sb2.ID}
	if fmt.Sprint(actions) != fmt.Sprint(wantAudit) {
		t.Errorf("audit log %v, want %v", actions, wantAudit)
	}
}

// TestWebhookURLRefused: without --webhook-permit, a webhook aimed at
// loopback (by address or by a name resolving there) or at the metadata
// address is refused at registration.
func TestWebhookURLRefused(t *testing.T) {
	s := testenv.StartServer(t)
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://localhost:8080/hook", "http://169.254.169.254/latest/meta-data/", "http://[::1]/"} {
		status, data := call(t, s, s.Key, "POST", "/v1/webhooks", strings.NewReader(`{"url":"`+u+`","events":["sandbox.ended"]}`))
		if status != 400 || !strings.Contains(string(data), "invalid_request") {
			t.Errorf("webhook to %s: %d %s, want 400 invalid_request", u, status, data)
		}
	}
	status, data := call(t, s, s.Key, "GET", "/v1/webhooks", nil)
	if status != 200 || !strings.Contains(string(data), `"webhooks":[]`) {
		t.Errorf("GET /v1/webhooks: %d %s, want none", status, data)
	}
}

// TestWebhookTemplateBuilt: a template made (here by a snapshot) is
// announced as template.built, with its name and tag.
func TestWebhookTemplateBuilt(t *testing.T) {
	s := testenv.StartServer(t, "--webhook-permit", "127.0.0.0/8")
	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p map[string]any
		json.NewDecoder(r.Body).Decode(&p)
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}))
	defer srv.Close()
	status, data := call(t, s, s.Key, "POST", "/v1/webhooks", strings.NewReader(`{"url":"`+srv.URL+`","events":["template.built"]}`))
	if status != 201 {
		t.Fatalf("POST /v1/webhooks: %d %s", status, data)
	}
	status, data = call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":512}`))
	var sb api.Sandbox
	if status != 201 || json.Unmarshal(data, &sb) != nil {
		t.Fatalf("create: %d %s", status, data)
	}
	status, data = call(t, s, s.Key, "POST", "/v1/sandboxes/"+sb.ID+"/snapshot", strings.NewReader(`{"template":"hooked:v1"}`))
	var tpl api.Template
	if status != 201 || json.Unmarshal(data, &tpl) != nil {
		t.Fatalf("snapshot: %d %s", status, data)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no template.built delivery")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	d, _ := got[0]["data"].(map[string]any)
	if len(got) != 1 || got[0]["type"] != "template.built" || d["template_id"] != tpl.ID || d["name"] != "hooked" || d["tag"] != "v1" {
		t.Fatalf("deliveries %v, want one template.built of %s (hooked:v1)", got, tpl.ID)
	}
}
