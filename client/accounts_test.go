package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func TestAccounts(t *testing.T) {
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var got api.CreateAccountRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/accounts", func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			writeError(w, 400, "invalid_request", err.Error())
			return
		}
		writeJSON(w, 201, api.Account{ID: "acc_1", Name: got.Name, Concurrency: got.Concurrency, TrialHours: got.TrialHours, CreatedAt: created})
	})
	mux.HandleFunc("GET /v1/accounts", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.AccountList{Accounts: []api.Account{{ID: "acc_0", Name: "default", Concurrency: 100}, {ID: "acc_1", Name: "team"}}})
	})
	c := newTestClient(t, mux)

	a, err := c.CreateAccount(t.Context(), api.CreateAccountRequest{Name: "team", Concurrency: 5, TrialHours: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	want := api.Account{ID: "acc_1", Name: "team", Concurrency: 5, TrialHours: 2.5, CreatedAt: created}
	if !reflect.DeepEqual(*a, want) {
		t.Errorf("create: got %+v, want %+v", *a, want)
	}
	if got != (api.CreateAccountRequest{Name: "team", Concurrency: 5, TrialHours: 2.5}) {
		t.Errorf("server got %+v", got)
	}
	l, err := c.ListAccounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].Name != "default" || l[1].ID != "acc_1" {
		t.Errorf("list: got %+v", l)
	}
}

func TestKeys(t *testing.T) {
	var got api.CreateKeyRequest
	var calls []string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/keys", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.String())
		json.NewDecoder(r.Body).Decode(&got)
		writeJSON(w, 201, api.Key{ID: "key_1", Account: "acc_1", Kind: got.Kind, DailyLimitMicros: got.DailyLimitMicros, Secret: "wr_secret"})
	})
	mux.HandleFunc("GET /v1/keys", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.String())
		writeJSON(w, 200, api.KeyList{Keys: []api.Key{{ID: "key_1", Account: r.URL.Query().Get("account"), Kind: "full"}}})
	})
	mux.HandleFunc("DELETE /v1/keys/{kid}", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.EscapedPath())
		if r.PathValue("kid") != "key_1" {
			writeError(w, 404, "not_found", "no key "+r.PathValue("kid"))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	c := newTestClient(t, mux)
	ctx := t.Context()

	k, err := c.CreateKey(ctx, api.CreateKeyRequest{Account: "team", Kind: "read_only", DailyLimitMicros: 1_500_000})
	if err != nil {
		t.Fatal(err)
	}
	if k.Secret != "wr_secret" || k.Kind != "read_only" || k.DailyLimitMicros != 1_500_000 {
		t.Errorf("create: got %+v", k)
	}
	if got != (api.CreateKeyRequest{Account: "team", Kind: "read_only", DailyLimitMicros: 1_500_000}) {
		t.Errorf("server got %+v", got)
	}
	if l, err := c.ListKeys(ctx, "team"); err != nil || len(l) != 1 || l[0].Account != "team" {
		t.Errorf("list team: got %+v, %v", l, err)
	}
	if _, err := c.ListKeys(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteKey(ctx, "key_1"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if err := c.DeleteKey(ctx, "a/b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete a/b: got %v, want not_found", err)
	}
	if err := c.DeleteKey(ctx, ""); err == nil {
		t.Error("delete empty id: got no error")
	}
	want := "POST /v1/keys,GET /v1/keys?account=team,GET /v1/keys,DELETE /v1/keys/key_1,DELETE /v1/keys/a%2Fb"
	if got := strings.Join(calls, ","); got != want {
		t.Errorf("calls:\ngot  %s\nwant %s", got, want)
	}
}

func TestUsage(t *testing.T) {
	var queries []string
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/usage" {
			writeError(w, 404, "not_found", r.URL.Path)
			return
		}
		queries = append(queries, r.URL.RawQuery)
		writeJSON(w, 200, api.Usage{
			Rows:       []api.UsageRow{{Day: "2030-01-02", Account: "acc_1", KeyID: "key_1", SandboxHours: 1.5, CostMicros: 46875}},
			CostMicros: 46875,
		})
	}))
	u, err := c.Usage(t.Context(), UsageFilter{Account: "team", Key: "key_1", From: "2030-01-01", To: "2030-01-31"})
	if err != nil {
		t.Fatal(err)
	}
	if u.CostMicros != 46875 || len(u.Rows) != 1 || u.Rows[0].SandboxHours != 1.5 {
		t.Errorf("got %+v", u)
	}
	if _, err := c.Usage(t.Context(), UsageFilter{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"account=team&from=2030-01-01&key=key_1&to=2030-01-31", ""}
	if !reflect.DeepEqual(queries, want) {
		t.Errorf("queries: got %q, want %q", queries, want)
	}
}

func TestTrialSendsNoKey(t *testing.T) {
	var auth []string
	allow := true
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/trial" {
			writeError(w, 404, "not_found", r.URL.Path)
			return
		}
		auth = append(auth, r.Header.Get("Authorization"))
		if !allow {
			writeError(w, 403, "forbidden", "this server offers no trials")
			return
		}
		writeJSON(w, 201, api.Trial{Account: "acc_t", Key: "wr_trial", TrialHours: 50})
	}))
	tr, err := c.Trial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if *tr != (api.Trial{Account: "acc_t", Key: "wr_trial", TrialHours: 50}) {
		t.Errorf("got %+v", tr)
	}
	allow = false
	if _, err := c.Trial(t.Context()); !errors.Is(err, ErrForbidden) {
		t.Errorf("refused: got %v, want forbidden", err)
	}
	if !reflect.DeepEqual(auth, []string{"", ""}) {
		t.Errorf("Authorization headers: got %q, want none (the client has key %q)", auth, testKey)
	}
}
