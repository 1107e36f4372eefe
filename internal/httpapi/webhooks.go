package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// Hooks is what the webhook and audit routes read and write of
// internal/store (store.Events).
type Hooks interface {
	PutWebhook(ctx context.Context, w *store.Webhook, max int) error
	ListWebhooks(ctx context.Context, account string) ([]store.Webhook, error)
	DeleteWebhook(ctx context.Context, account, id string) error
	ListDeliveries(ctx context.Context, id string, limit int) ([]store.Delivery, error)
	AppendAudit(ctx context.Context, a *store.AuditEntry) error
	ListAudit(ctx context.Context, since time.Time, limit int) ([]store.AuditEntry, error)
}

// deliveriesShown is how many of each webhook's latest deliveries GET
// /v1/webhooks shows.
const deliveriesShown = 10

// Audit listing bounds.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

func (s *server) hooks() (Hooks, error) {
	if s.cfg.Hooks == nil {
		return nil, sandbox.Errorf(sandbox.KindNotSupported, "this server keeps no webhooks or audit log")
	}
	return s.cfg.Hooks, nil
}

func (s *server) createWebhook(w http.ResponseWriter, r *http.Request, c caller) error {
	h, err := s.hooks()
	if err != nil {
		return err
	}
	var req api.CreateWebhookRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, false, &req); err != nil {
		return err
	}
	if len(req.Events) == 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "events: name at least one of %v", api.WebhookEvents)
	}
	var events []string
	for _, e := range req.Events {
		if !slices.Contains(api.WebhookEvents, e) {
			return sandbox.Errorf(sandbox.KindInvalid, "events: unknown event %q; the events are %v", e, api.WebhookEvents)
		}
		if !slices.Contains(events, e) {
			events = append(events, e)
		}
	}
	if s.cfg.CheckWebhookURL == nil {
		return sandbox.Errorf(sandbox.KindNotSupported, "this server delivers no webhooks")
	}
	if err := s.cfg.CheckWebhookURL(r.Context(), req.URL); err != nil {
		return err
	}
	var id [8]byte
	var key [32]byte
	rand.Read(id[:])
	rand.Read(key[:])
	wh := &store.Webhook{
		ID: "wh_" + hex.EncodeToString(id[:]), Account: c.account, URL: req.URL, Events: events,
		Secret: "whsec_" + base64.StdEncoding.EncodeToString(key[:]), CreatedAt: s.now().UTC().Truncate(time.Millisecond),
	}
	if err := h.PutWebhook(r.Context(), wh, api.MaxWebhooksPerAccount); err != nil {
		return err
	}
	infoFrom(r.Context()).target = wh.ID
	v := webhookView(wh)
	v.Secret = wh.Secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func webhookView(w *store.Webhook) api.Webhook {
	return api.Webhook{ID: w.ID, URL: w.URL, Events: w.Events, CreatedAt: w.CreatedAt}
}

func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request, c caller) error {
	h, err := s.hooks()
	if err != nil {
		return err
	}
	list, err := h.ListWebhooks(r.Context(), c.account)
	if err != nil {
		return err
	}
	out := api.WebhookList{Webhooks: []api.Webhook{}}
	for i := range list {
		v := webhookView(&list[i])
		ds, err := h.ListDeliveries(r.Context(), list[i].ID, deliveriesShown)
		if err != nil {
			return err
		}
		for _, d := range ds {
			v.Deliveries = append(v.Deliveries, api.WebhookDelivery{
				EventID: "evt_" + strconv.FormatInt(d.EventSeq, 10), EventType: d.EventType, Subject: d.Subject,
				Status: d.Status, Attempts: d.Attempts, HTTPCode: d.HTTPCode, Error: d.Error, At: d.At,
			})
		}
		out.Webhooks = append(out.Webhooks, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request, c caller) error {
	h, err := s.hooks()
	if err != nil {
		return err
	}
	if err := h.DeleteWebhook(r.Context(), c.account, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) listAudit(w http.ResponseWriter, r *http.Request, c caller) error {
	h, err := s.hooks()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return sandbox.Errorf(sandbox.KindInvalid, "since: want an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
	}
	limit := defaultAuditLimit
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxAuditLimit {
			return sandbox.Errorf(sandbox.KindInvalid, "limit: want 1 to %d", maxAuditLimit)
		}
	}
	list, err := h.ListAudit(r.Context(), since, limit)
	if err != nil {
		return err
	}
	out := api.AuditLog{Entries: []api.AuditEntry{}}
	for _, a := range list {
		out.Entries = append(out.Entries, api.AuditEntry{Seq: a.Seq, At: a.At, Account: a.Account, KeyID: a.KeyID, Action: a.Action, Target: a.Target, Remote: a.Remote})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// auditActions names the changes the audit log records, by route. Reads,
// commands and file writes inside a sandbox are not recorded: they change
// the sandbox's contents, which are its owner's, not the installation's.
var auditActions = map[string]string{
	"POST " + api.Version + "/sandboxes":                "sandbox.create",
	"DELETE " + sandboxPrefix:                           "sandbox.stop",
	"POST " + sandboxPrefix + "/stop":                   "sandbox.stop",
	"POST " + sandboxPrefix + "/extend":                 "sandbox.extend",
	"POST " + sandboxPrefix + "/pause":                  "sandbox.pause",
	"POST " + sandboxPrefix + "/resume":                 "sandbox.resume",
	"PUT " + sandboxPrefix + "/network":                 "sandbox.network_set",
	"PUT " + sandboxPrefix + "/previews":                "sandbox.previews_set",
	"PUT " + sandboxPrefix + "/previews/{port}":         "sandbox.previews_set",
	"POST " + sandboxPrefix + "/previews/revoke":        "sandbox.previews_revoke",
	"POST " + sandboxPrefix + "/snapshot":               "template.snapshot",
	"POST " + api.Version + "/templates":                "template.build",
	"POST " + api.Version + "/templates/import":         "template.import",
	"DELETE " + api.Version + "/templates/{name}":       "template.delete",
	"POST " + api.Version + "/templates/{name}/publish": "template.publish",
	"PUT " + api.Version + "/secrets/{name}":            "secret.set",
	"DELETE " + api.Version + "/secrets/{name}":         "secret.delete",
	"POST " + api.Version + "/volumes":                  "volume.create",
	"DELETE " + api.Version + "/volumes/{name}":         "volume.delete",
	"POST " + api.Version + "/accounts":                 "account.create",
	"POST " + api.Version + "/keys":                     "key.create",
	"DELETE " + api.Version + "/keys/{kid}":             "key.revoke",
	"POST " + api.Version + "/webhooks":                 "webhook.create",
	"DELETE " + api.Version + "/webhooks/{id}":          "webhook.delete",
}

// audit records a change the request made, once its handler succeeded.
// Secrets are named, never their values (no body is read here). A failed
// write is logged: the change itself stands.
func (s *server) audit(w http.ResponseWriter, r *http.Request, rt Route, c caller) {
	action, ok := auditActions[rt.Method+" "+rt.Pattern]
	if !ok || s.cfg.Hooks == nil {
		return
	}
	if sw, ok := w.(*statusWriter); ok && sw.status >= 400 {
		return
	}
	info := infoFrom(r.Context())
	target := info.target
	for _, p := range []string{"id", "name", "kid"} {
		if target == "" {
			target = r.PathValue(p)
		}
	}
	if target == "" {
		target = info.sandboxID
	}
	remote := r.RemoteAddr
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host
	}
	a := &store.AuditEntry{Account: c.account, KeyID: c.keyID, Action: action, Target: target, Remote: remote}
	if err := s.cfg.Hooks.AppendAudit(context.WithoutCancel(r.Context()), a); err != nil {
		s.log.Warn("writing an audit entry", "action", action, "target", target, "error", err)
	}
}
