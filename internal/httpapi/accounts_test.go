package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
)

// e2bKeyShape is the shape of a key in E2B's format as this server makes
// it: E2B's SDKs that check keys want "e2b_" and lowercase hex digits.
var e2bKeyShape = regexp.MustCompile(`^e2b_[0-9a-f]{64}$`)

// decodeStrict reads a JSON body of v's type, refusing fields it lacks.
func decodeStrict(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %T: %v", v, err)
	}
}

// wantStatus fails the test unless resp has status, and for errors code.
func wantStatus(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status: got %d, want %d", resp.StatusCode, status)
	}
	if code != "" {
		if got := errorOf(t, resp).Code; got != code {
			t.Errorf("code: got %q, want %q", got, code)
		}
	}
}

func TestAccountsAdminOnly(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.DefaultConcurrency = 7 })
	for _, kind := range []store.KeyKind{store.KeyFull, store.KeyReadOnly} {
		t.Run(string(kind), func(t *testing.T) {
			wantStatus(t, e.doJSON("POST", "/v1/accounts", e.keys[kind], `{"name":"team"}`), 403, "forbidden")
			wantStatus(t, e.do("GET", "/v1/accounts", e.keys[kind], nil), 403, "forbidden")
		})
	}
	if _, err := e.store.GetAccount(t.Context(), "team"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Fatalf("account made by a refused request: %v", err)
	}

	admin := e.keys[store.KeyAdmin]
	tests := []struct {
		body            string
		wantConcurrency int
		wantTrialHours  float64
		wantStored      store.Account
	}{
		{`{"name":"team"}`, 7, 0, store.Account{ID: "team", Name: "team"}},
		{`{"name":"Big_team-2","concurrency":250}`, 250, 0, store.Account{ID: "Big_team-2", Name: "Big_team-2", Concurrency: 250}},
		{`{"name":"trial","trial_hours":1.5}`, accounts.DefaultTrialConcurrency, 1.5, store.Account{ID: "trial", Name: "trial", TrialSeconds: 5400, Concurrency: accounts.DefaultTrialConcurrency}},
		{`{"name":"big_trial","trial_hours":1,"concurrency":9}`, 9, 1, store.Account{ID: "big_trial", Name: "big_trial", TrialSeconds: 3600, Concurrency: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			resp := e.doJSON("POST", "/v1/accounts", admin, tt.body)
			wantStatus(t, resp, 201, "")
			var a api.Account
			decodeStrict(t, resp, &a)
			if a.ID != tt.wantStored.ID || a.Name != tt.wantStored.ID || a.Concurrency != tt.wantConcurrency || a.TrialHours != tt.wantTrialHours {
				t.Errorf("got %+v, want id and name %s, concurrency %d, trial_hours %v", a, tt.wantStored.ID, tt.wantConcurrency, tt.wantTrialHours)
			}
			if time.Since(a.CreatedAt) > time.Minute {
				t.Errorf("created_at: got %v, want now", a.CreatedAt)
			}
			got, err := e.store.GetAccount(t.Context(), tt.wantStored.ID)
			if err != nil {
				t.Fatal(err)
			}
			got.CreatedAt = time.Time{}
			if *got != tt.wantStored {
				t.Errorf("stored: got %+v, want %+v", *got, tt.wantStored)
			}
		})
	}

	wantStatus(t, e.doJSON("POST", "/v1/accounts", admin, `{"name":"team","concurrency":3}`), 409, "conflict")

	// The trial account's used hours come from the ledger, counted by
	// size: half an hour of 4 GiB, then half an hour of 2 GiB.
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-01", Account: "trial", KeyID: "k", AliveMs: 1_800_000, MemoryMiBMs: 4096 * 1_800_000})
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-02", Account: "trial", KeyID: "k2", AliveMs: 1_800_000, MemoryMiBMs: 2048 * 1_800_000})
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-02", Account: "team", KeyID: "k3", AliveMs: 900_000})
	resp := e.do("GET", "/v1/accounts", admin, nil)
	wantStatus(t, resp, 200, "")
	var list api.AccountList
	decodeStrict(t, resp, &list)
	var names []string
	for _, a := range list.Accounts {
		names = append(names, a.ID)
		switch a.ID {
		case "trial":
			if a.TrialHours != 1.5 || a.TrialUsedHours != 0.75 {
				t.Errorf("trial: got trial_hours %v used %v, want 1.5 and 0.75", a.TrialHours, a.TrialUsedHours)
			}
		case "team":
			if a.TrialHours != 0 || a.TrialUsedHours != 0 || a.Concurrency != 7 {
				t.Errorf("team: got %+v, want no trial and concurrency 7", a)
			}
		}
	}
	if want := []string{"team", "Big_team-2", "trial", "big_trial"}; !slices.Equal(names, want) {
		t.Errorf("accounts: got %v, want %v", names, want)
	}
}

// seedUsage adds d to the ledger the way the meter does.
func seedUsage(t *testing.T, st store.Store, d store.UsageDelta) {
	t.Helper()
	r := &sandbox.Record{ID: "sbx-meter-" + randomHex()[:8], Account: d.Account, State: sandbox.StateEnded}
	if err := st.RecordUsage(t.Context(), r, d); err != nil {
		t.Fatal(err)
	}
}

func TestKeyLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	full := e.keys[store.KeyFull]

	made := map[string]api.Key{}
	for _, tt := range []struct {
		body     string
		wantKind string
	}{
		{``, "full"},
		{`{"name":"ci","daily_limit_micros":500000}`, "full"},
		{`{"kind":"read_only","account":"acct1"}`, "read_only"},
		{`{"format":"withruntime"}`, "full"},
		// Keys in E2B's format are keys like the others: kind, limit,
		// listing, use and removal below hold for them too.
		{`{"format":"e2b","name":"e2b","daily_limit_micros":250000}`, "full"},
		{`{"kind":"read_only","format":"e2b"}`, "read_only"},
	} {
		resp := e.doJSON("POST", "/v1/keys", full, tt.body)
		wantStatus(t, resp, 201, "")
		var k api.Key
		decodeStrict(t, resp, &k)
		if k.Account != "acct1" || k.Kind != tt.wantKind || !strings.HasPrefix(k.ID, "key_") {
			t.Errorf("%s: got %+v, want a %s key of acct1 with a key_ id", tt.body, k, tt.wantKind)
		}
		if strings.Contains(tt.body, `"e2b"`) {
			if !e2bKeyShape.MatchString(k.Secret) {
				t.Errorf("%s: secret %q: want e2b_ and 64 lowercase hex digits", tt.body, k.Secret)
			}
		} else if !strings.HasPrefix(k.Secret, "wr_") || len(k.Secret) != 3+43 {
			t.Errorf("%s: secret %q: want wr_ and 43 base64url characters", tt.body, k.Secret)
		}
		if strings.Contains(tt.body, `"name":"e2b"`) && (k.Name != "e2b" || k.DailyLimitMicros != 250000) {
			t.Errorf("%s: got name %q limit %d, want e2b and 250000", tt.body, k.Name, k.DailyLimitMicros)
		}
		if strings.Contains(tt.body, "ci") && (k.Name != "ci" || k.DailyLimitMicros != 500000) {
			t.Errorf("%s: got name %q limit %d, want ci and 500000", tt.body, k.Name, k.DailyLimitMicros)
		}
		made[k.ID] = k
	}

	// The list shows every key of the account, and no secret.
	resp := e.do("GET", "/v1/keys", e.keys[store.KeyReadOnly], nil)
	wantStatus(t, resp, 200, "")
	var raw struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range raw.Keys {
		if _, ok := k["key"]; ok {
			t.Errorf("listed key %v shows its secret", k["id"])
		}
		if k["account"] != "acct1" {
			t.Errorf("listed key of account %v, want acct1 only", k["account"])
		}
		ids = append(ids, k["id"].(string))
	}
	for id := range made {
		if !slices.Contains(ids, id) {
			t.Errorf("key %s not listed: %v", id, ids)
		}
	}
	if len(ids) != 3+len(made) { // full, read_only and spare, and those made
		t.Errorf("listed %d keys, want %d: %v", len(ids), 3+len(made), ids)
	}
	stored, _ := e.store.ListKeys(t.Context(), "acct1")
	for _, k := range stored {
		if m, ok := made[k.ID]; ok && strings.Contains(string(k.Hash), m.Secret) {
			t.Errorf("key %s stored its secret", k.ID)
		}
	}

	for id, k := range made {
		// The new key works, as its kind allows.
		wantStatus(t, e.do("GET", "/v1/sandboxes", k.Secret, nil), 200, "")
		if k.Kind == "read_only" {
			wantStatus(t, e.doJSON("POST", "/v1/sandboxes", k.Secret, `{}`), 403, "forbidden")
		}
		// Removed, it stops working at once.
		wantStatus(t, e.do("DELETE", "/v1/keys/"+id, full, nil), 204, "")
		wantStatus(t, e.do("GET", "/v1/sandboxes", k.Secret, nil), 401, "unauthorized")
		wantStatus(t, e.do("DELETE", "/v1/keys/"+id, full, nil), 404, "not_found")
	}
}

func TestKeyCreationAcrossAccounts(t *testing.T) {
	e := newEnv(t, nil)
	admin, full := e.keys[store.KeyAdmin], e.keys[store.KeyFull]
	if err := e.store.PutAccount(t.Context(), store.Account{ID: "acct2", Name: "acct2"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, key, body string
		wantStatus      int
		wantCode        string
		wantAccount     string
	}{
		{"full names another account", full, `{"account":"acct2"}`, 403, "forbidden", ""},
		{"full names a missing account", full, `{"account":"nobody"}`, 403, "forbidden", ""},
		{"full asks for an admin key", full, `{"kind":"admin"}`, 403, "forbidden", ""},
		{"read_only asks for a key", e.keys[store.KeyReadOnly], `{"kind":"read_only"}`, 403, "forbidden", ""},
		{"admin for another account", admin, `{"account":"acct2","kind":"read_only"}`, 201, "", "acct2"},
		{"admin for a missing account", admin, `{"account":"nobody"}`, 404, "not_found", ""},
		{"admin for itself", admin, `{}`, 201, "", "admin"},
		{"admin makes an admin key", admin, `{"account":"acct2","kind":"admin"}`, 201, "", "acct2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := e.store.ListKeys(t.Context(), "")
			resp := e.doJSON("POST", "/v1/keys", tt.key, tt.body)
			wantStatus(t, resp, tt.wantStatus, tt.wantCode)
			after, _ := e.store.ListKeys(t.Context(), "")
			if tt.wantStatus != 201 {
				if len(after) != len(before) {
					t.Errorf("a refused request made a key: %d keys, want %d", len(after), len(before))
				}
				return
			}
			var k api.Key
			decodeStrict(t, resp, &k)
			if k.Account != tt.wantAccount {
				t.Errorf("account: got %q, want %q", k.Account, tt.wantAccount)
			}
		})
	}

	// The admin key lists any account's keys, or all of them.
	for _, tt := range []struct {
		query string
		want  int
	}{{"", 7}, {"?account=acct2", 2}, {"?account=acct1", 3}, {"?account=nobody", 0}} {
		resp := e.do("GET", "/v1/keys"+tt.query, admin, nil)
		wantStatus(t, resp, 200, "")
		var list api.KeyList
		decodeStrict(t, resp, &list)
		if len(list.Keys) != tt.want {
			t.Errorf("GET /v1/keys%s: got %d keys, want %d", tt.query, len(list.Keys), tt.want)
		}
	}
	wantStatus(t, e.do("GET", "/v1/keys?account=acct2", full, nil), 403, "forbidden")
	wantStatus(t, e.do("GET", "/v1/keys?account=nobody", full, nil), 403, "forbidden")
	wantStatus(t, e.do("GET", "/v1/keys?account=acct1", full, nil), 200, "")
}

func TestKeyDeletionAcrossAccounts(t *testing.T) {
	e := newEnv(t, nil)
	admin, full := e.keys[store.KeyAdmin], e.keys[store.KeyFull]

	// acct1's full key cannot reach the admin account's key.
	wantStatus(t, e.do("DELETE", "/v1/keys/key-0", full, nil), 404, "not_found")
	wantStatus(t, e.do("GET", "/v1/sandboxes", admin, nil), 200, "")

	// A full key of the admin's own account sees the admin key but cannot
	// remove it.
	resp := e.doJSON("POST", "/v1/keys", admin, `{}`)
	wantStatus(t, resp, 201, "")
	var adminsFull api.Key
	decodeStrict(t, resp, &adminsFull)
	wantStatus(t, e.do("DELETE", "/v1/keys/key-0", adminsFull.Secret, nil), 403, "forbidden")

	// The last admin key stays.
	wantStatus(t, e.do("DELETE", "/v1/keys/key-0", admin, nil), 409, "conflict")
	resp = e.doJSON("POST", "/v1/keys", admin, `{"kind":"admin"}`)
	wantStatus(t, resp, 201, "")
	var second api.Key
	decodeStrict(t, resp, &second)
	wantStatus(t, e.do("DELETE", "/v1/keys/key-0", second.Secret, nil), 204, "")
	wantStatus(t, e.do("GET", "/v1/accounts", admin, nil), 401, "unauthorized")

	// The admin key removes another account's key.
	wantStatus(t, e.do("DELETE", "/v1/keys/"+spareKeyID, second.Secret, nil), 204, "")
	wantStatus(t, e.do("GET", "/v1/sandboxes", full, nil), 200, "")
}

func TestUsage(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.store.PutAccount(t.Context(), store.Account{ID: "acct2"}); err != nil {
		t.Fatal(err)
	}
	const hourMs = 3_600_000
	// A 2 vCPU, 4 GiB sandbox for an hour, both CPUs busy half of it.
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-01", Account: "acct1", KeyID: "key-1",
		AliveMs: hourMs, CPUNs: 3_600_000_000_000, MemoryMiBMs: 4096 * hourMs, CostNanos: 55_625_000})
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-02", Account: "acct1", KeyID: "key-1", AliveMs: 1000, CostNanos: 1})
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-02", Account: "acct1", KeyID: "key-2", AliveMs: 1000, CostNanos: 1})
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-03", Account: "acct2", KeyID: "key-x", AliveMs: 1000, CostNanos: 2500})

	full, admin := e.keys[store.KeyFull], e.keys[store.KeyAdmin]
	tests := []struct {
		name, key, query string
		wantRows         []string // day/account/key
		wantCost         int64
	}{
		{"own account", full, "", []string{"2026-03-01/acct1/key-1", "2026-03-02/acct1/key-1", "2026-03-02/acct1/key-2"}, 55_626},
		{"read_only key", e.keys[store.KeyReadOnly], "", []string{"2026-03-01/acct1/key-1", "2026-03-02/acct1/key-1", "2026-03-02/acct1/key-2"}, 55_626},
		{"one key", full, "?key=key-2", []string{"2026-03-02/acct1/key-2"}, 1},
		{"another account's key", full, "?key=key-x", nil, 0},
		{"from", full, "?from=2026-03-02", []string{"2026-03-02/acct1/key-1", "2026-03-02/acct1/key-2"}, 1},
		{"to", full, "?to=2026-03-01", []string{"2026-03-01/acct1/key-1"}, 55_625},
		{"from and to", full, "?from=2026-03-02&to=2026-03-02&key=key-1", []string{"2026-03-02/acct1/key-1"}, 1},
		{"own account named", full, "?account=acct1&from=2026-03-03", nil, 0},
		{"admin, every account", admin, "", []string{"2026-03-01/acct1/key-1", "2026-03-02/acct1/key-1", "2026-03-02/acct1/key-2", "2026-03-03/acct2/key-x"}, 55_628}, // 55_627_502 nanos
		{"admin, one account", admin, "?account=acct2", []string{"2026-03-03/acct2/key-x"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.do("GET", "/v1/usage"+tt.query, tt.key, nil)
			wantStatus(t, resp, 200, "")
			var u api.Usage
			decodeStrict(t, resp, &u)
			var rows []string
			for _, r := range u.Rows {
				rows = append(rows, r.Day+"/"+r.Account+"/"+r.KeyID)
			}
			if !slices.Equal(rows, tt.wantRows) {
				t.Errorf("rows: got %v, want %v", rows, tt.wantRows)
			}
			if u.CostMicros != tt.wantCost {
				t.Errorf("cost_micros: got %d, want %d", u.CostMicros, tt.wantCost)
			}
			if u.Rows == nil {
				t.Errorf("rows: got null, want an array")
			}
		})
	}

	// Units: hours, GiB-hours and micros rounded up.
	resp := e.do("GET", "/v1/usage?to=2026-03-01", full, nil)
	var u api.Usage
	decodeStrict(t, resp, &u)
	want := api.UsageRow{Day: "2026-03-01", Account: "acct1", KeyID: "key-1",
		SandboxHours: 1, CPUHours: 1, MemoryGiBHours: 4, CostMicros: 55_625}
	if len(u.Rows) != 1 || u.Rows[0] != want {
		t.Errorf("got %+v, want [%+v]", u.Rows, want)
	}
	resp = e.do("GET", "/v1/usage?from=2026-03-02&to=2026-03-02", full, nil)
	decodeStrict(t, resp, &u)
	// Two rows of 1 nano each: each shows 1 micro, the total shows 1.
	if len(u.Rows) != 2 || u.Rows[0].CostMicros != 1 || u.Rows[1].CostMicros != 1 || u.CostMicros != 1 {
		t.Errorf("got %+v, want two rows of 1 micro and a total of 1", u)
	}
	if got := u.Rows[0].SandboxHours; got != 1000.0/3.6e6 {
		t.Errorf("sandbox_hours: got %v, want %v", got, 1000.0/3.6e6)
	}

	wantStatus(t, e.do("GET", "/v1/usage?account=acct2", full, nil), 403, "forbidden")
	wantStatus(t, e.do("GET", "/v1/usage?account=nobody", full, nil), 403, "forbidden")
}

func TestAccountsAndKeysBadRequests(t *testing.T) {
	e := newEnv(t, nil)
	admin, full := e.keys[store.KeyAdmin], e.keys[store.KeyFull]
	tests := []struct {
		name, key, method, path, body string
		wantMsg                       string // a part of the message
	}{
		{"account unknown field", admin, "POST", "/v1/accounts", `{"name":"a","owner":"b"}`, `unknown field "owner"`},
		{"account empty body", admin, "POST", "/v1/accounts", ``, "request body is empty"},
		{"account no name", admin, "POST", "/v1/accounts", `{}`, "name is required"},
		{"account name with a space", admin, "POST", "/v1/accounts", `{"name":"a b"}`, "use only letters"},
		{"account name with a slash", admin, "POST", "/v1/accounts", `{"name":"a/b"}`, "use only letters"},
		{"account name with a dot", admin, "POST", "/v1/accounts", `{"name":"a.b"}`, "use only letters"},
		{"account name not ASCII", admin, "POST", "/v1/accounts", `{"name":"café"}`, "use only letters"},
		{"account name too long", admin, "POST", "/v1/accounts", `{"name":"` + strings.Repeat("a", 65) + `"}`, "at most 64"},
		{"account NUL in name", admin, "POST", "/v1/accounts", `{"name":"a\u0000"}`, "name contains a NUL byte"},
		{"account negative concurrency", admin, "POST", "/v1/accounts", `{"name":"a","concurrency":-1}`, "concurrency must be 1 to 10000"},
		{"account concurrency too high", admin, "POST", "/v1/accounts", `{"name":"a","concurrency":10001}`, "concurrency must be 1 to 10000"},
		{"account negative trial", admin, "POST", "/v1/accounts", `{"name":"a","trial_hours":-1}`, "trial_hours must be 0 to"},
		{"account huge trial", admin, "POST", "/v1/accounts", `{"name":"a","trial_hours":1e300}`, "trial_hours must be 0 to"},
		{"account concurrency not an integer", admin, "POST", "/v1/accounts", `{"name":"a","concurrency":1.5}`, "field concurrency must be an integer"},
		{"accounts query", admin, "GET", "/v1/accounts?name=a", ``, `unknown query parameter "name"`},

		{"key unknown field", full, "POST", "/v1/keys", `{"scope":"all"}`, `unknown field "scope"`},
		{"key negative limit", full, "POST", "/v1/keys", `{"daily_limit_micros":-1}`, "daily_limit_micros must not be negative"},
		{"key unknown kind", full, "POST", "/v1/keys", `{"kind":"owner"}`, `kind must be "full" or "read_only"`},
		{"key unknown format", full, "POST", "/v1/keys", `{"format":"E2B"}`, `format must be "withruntime" or "e2b", not "E2B"`},
		{"key long name", full, "POST", "/v1/keys", `{"name":"` + strings.Repeat("n", 101) + `"}`, "at most 100"},
		{"keys unknown query", full, "GET", "/v1/keys?acount=acct1", ``, `unknown query parameter "acount"`},

		{"usage bad from", full, "GET", "/v1/usage?from=2026-3-1", ``, `from must be a day as YYYY-MM-DD, not "2026-3-1"`},
		{"usage bad to", full, "GET", "/v1/usage?to=yesterday", ``, "to must be a day"},
		{"usage impossible day", full, "GET", "/v1/usage?from=2026-02-30", ``, "from must be a day"},
		{"usage a time", full, "GET", "/v1/usage?to=2026-03-01T00:00:00Z", ``, "to must be a day"},
		{"usage from after to", full, "GET", "/v1/usage?from=2026-03-02&to=2026-03-01", ``, "is after to"},
		{"usage unknown query", full, "GET", "/v1/usage?day=2026-03-01", ``, `unknown query parameter "day"`},
		{"usage repeated query", full, "GET", "/v1/usage?key=a&key=b", ``, "given 2 times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := e.store.ListKeys(t.Context(), "")
			resp := e.doJSON(tt.method, tt.path, tt.key, tt.body)
			wantStatus(t, resp, 400, "")
			if d := errorOf(t, resp); d.Code != "invalid_request" || !strings.Contains(d.Message, tt.wantMsg) {
				t.Errorf("got %+v, want invalid_request containing %q", d, tt.wantMsg)
			}
			after, _ := e.store.ListKeys(t.Context(), "")
			accounts, _ := e.store.ListAccounts(t.Context())
			if len(after) != len(before) || len(accounts) != 0 {
				t.Errorf("a bad request made something: %d keys (want %d), %d accounts", len(after), len(before), len(accounts))
			}
		})
	}
}
