package httpapi

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/accounts"
	"github.com/withruntime/withruntime/internal/store"
)

func TestTrialDisabled(t *testing.T) {
	e := newEnv(t, nil)
	resp := e.doJSON("POST", "/v1/trial", "", `{}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status: got %d, want 403", resp.StatusCode)
	}
	if d := errorOf(t, resp); d.Code != "forbidden" || d.Message != "this server does not offer trial accounts" {
		t.Errorf("got %+v, want forbidden: this server does not offer trial accounts", d)
	}
	if accounts, _ := e.store.ListAccounts(t.Context()); len(accounts) != 0 {
		t.Errorf("accounts made: %v", accounts)
	}
}

func TestTrial(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Trial = TrialConfig{Enabled: true, PerAddress: 2} })
	var trials []api.Trial
	for i, body := range []string{``, `{}`} {
		resp := e.doJSON("POST", "/v1/trial", "", body)
		wantStatus(t, resp, 201, "")
		var tr api.Trial
		decodeStrict(t, resp, &tr)
		if len(tr.Account) != len("trial-")+16 || tr.Account[:6] != "trial-" || tr.TrialHours != accounts.DefaultTrialHours {
			t.Errorf("trial %d: got %+v, want a trial- account of %d hours", i, tr, accounts.DefaultTrialHours)
		}
		trials = append(trials, tr)
	}
	if trials[0].Account == trials[1].Account || trials[0].Key == trials[1].Key {
		t.Fatalf("two trials share an account or a key: %+v", trials)
	}

	// The key works and acts for its own account, with a full key's rights.
	tr := trials[0]
	wantStatus(t, e.do("GET", "/v1/sandboxes", tr.Key, nil), 200, "")
	wantStatus(t, e.doJSON("POST", "/v1/sandboxes", tr.Key, `{}`), 201, "")
	if calls := e.fake.callLog(); calls[len(calls)-1] != "Create "+tr.Account {
		t.Errorf("last call: got %q, want Create %s", calls[len(calls)-1], tr.Account)
	}
	wantStatus(t, e.do("GET", "/v1/accounts", tr.Key, nil), 403, "forbidden")
	a, err := e.store.GetAccount(t.Context(), tr.Account)
	if err != nil {
		t.Fatal(err)
	}
	if a.TrialSeconds != accounts.DefaultTrialHours*3600 || a.Concurrency != accounts.DefaultTrialConcurrency {
		t.Errorf("stored account: got %+v, want %d trial seconds and concurrency %d", a, accounts.DefaultTrialHours*3600, accounts.DefaultTrialConcurrency)
	}
	keys, _ := e.store.ListKeys(t.Context(), tr.Account)
	if len(keys) != 1 || keys[0].Kind != store.KeyFull {
		t.Errorf("keys of the trial account: got %+v, want one full key", keys)
	}

	// The third from the same address within the hour is refused.
	resp := e.doJSON("POST", "/v1/trial", "", `{}`)
	wantStatus(t, resp, 429, "rate_limited")
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 3500 || s > 3600 {
		t.Errorf("Retry-After: got %q, want about 3600", resp.Header.Get("Retry-After"))
	}
	if accounts, _ := e.store.ListAccounts(t.Context()); len(accounts) != 2 {
		t.Errorf("accounts: got %d, want 2", len(accounts))
	}
	// A bad body is refused before it counts.
	wantStatus(t, e.doJSON("POST", "/v1/trial", "", `{"hours":1000}`), 400, "invalid_request")
}

func TestTrialHoursConfigured(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Trial = TrialConfig{Enabled: true, Hours: 0.01} })
	resp := e.doJSON("POST", "/v1/trial", "", ``)
	wantStatus(t, resp, 201, "")
	var tr api.Trial
	decodeStrict(t, resp, &tr)
	if tr.TrialHours != 0.01 {
		t.Errorf("trial_hours: got %v, want 0.01", tr.TrialHours)
	}
	if a, err := e.store.GetAccount(t.Context(), tr.Account); err != nil || a.TrialSeconds != 36 {
		t.Errorf("stored: got %+v (%v), want 36 trial seconds", a, err)
	}
}

func TestConfigValidate(t *testing.T) {
	base := Config{Sandboxes: newFakeSandboxes(""), Store: &store.Bolt{}}
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr bool
	}{
		{"defaults", func(*Config) {}, false},
		{"concurrency at the bound", func(c *Config) { c.DefaultConcurrency = accounts.MaxAccountConcurrency }, false},
		{"negative concurrency", func(c *Config) { c.DefaultConcurrency = -1 }, true},
		{"concurrency over the bound", func(c *Config) { c.DefaultConcurrency = accounts.MaxAccountConcurrency + 1 }, true},
		{"trial", func(c *Config) { c.Trial = TrialConfig{Enabled: true, Hours: 2, PerAddress: 1, Window: time.Minute} }, false},
		{"negative trial hours", func(c *Config) { c.Trial.Hours = -1 }, true},
		{"huge trial hours", func(c *Config) { c.Trial.Hours = 1e18 }, true},
		{"negative per address", func(c *Config) { c.Trial.PerAddress = -1 }, true},
		{"negative window", func(c *Config) { c.Trial.Window = -time.Second }, true},
		{"trial bounds", func(c *Config) {
			c.Trial = TrialConfig{PerWindow: 5, OutstandingHours: 100, MaxSize: Size{VCPUs: 1}, Concurrency: 1, MaxKeys: 1}
		}, false},
		{"negative per window", func(c *Config) { c.Trial.PerWindow = -1 }, true},
		{"negative trial size", func(c *Config) { c.Trial.MaxSize.MemoryMiB = -1 }, true},
		{"negative trial keys", func(c *Config) { c.Trial.MaxKeys = -1 }, true},
		{"trial concurrency over the bound", func(c *Config) { c.Trial.Concurrency = accounts.MaxAccountConcurrency + 1 }, true},
		{"outstanding hours below a trial's", func(c *Config) { c.Trial = TrialConfig{Enabled: true, Hours: 100, OutstandingHours: 99} }, true},
		{"outstanding hours below the default trial's", func(c *Config) {
			c.Trial = TrialConfig{Enabled: true, OutstandingHours: accounts.DefaultTrialHours / 2}
		}, true},
		{"outstanding hours below a trial's, trials off", func(c *Config) { c.Trial = TrialConfig{Hours: 100, OutstandingHours: 99} }, false},
		{"negative keys per account", func(c *Config) { c.MaxKeysPerAccount = -1 }, true},
		{"negative default size", func(c *Config) { c.DefaultSize.VCPUs = -1 }, true},
	}
	for _, tt := range tests {
		c := base
		tt.mod(&c)
		if err := c.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("%s: got %v, want an error %v", tt.name, err, tt.wantErr)
		}
	}
}
