package httpapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// stubBackend starts sandboxes that do nothing: what the trial's bounds are
// checked against is the real manager's admission and the real store, and
// a real sandbox needs root and gVisor, which these unit tests do not
// have (test/e2e runs trials on real ones).
type stubBackend struct{}

type stubInstance struct{ done chan struct{} }

func (stubBackend) Name() string { return "stub" }
func (stubBackend) Start(context.Context, string, sandbox.Spec) (sandbox.Instance, error) {
	return stubInstance{done: make(chan struct{})}, nil
}
func (stubBackend) Attach(context.Context, string, sandbox.Spec) (sandbox.Instance, error) {
	return nil, fmt.Errorf("not running")
}
func (stubBackend) Pause(context.Context, string) error { return fmt.Errorf("not supported") }
func (stubBackend) Resume(context.Context, string, sandbox.Spec) (sandbox.Instance, error) {
	return nil, fmt.Errorf("not supported")
}
func (stubBackend) Destroy(context.Context, string) error             { return nil }
func (stubBackend) Sweep(context.Context, func(id string) bool) error { return nil }
func (i stubInstance) DialAgent(context.Context) (net.Conn, error) {
	return nil, fmt.Errorf("no agent")
}
func (i stubInstance) Done() <-chan struct{}              { return i.done }
func (i stubInstance) Cause() (sandbox.EndReason, string) { return "", "" }

// newManagerEnv is a server over a real listener with the real manager
// (on stubBackend) and a real bbolt store; keys holds the admin key only.
// The manager's default size is 4 vCPUs, 8 GiB and 20 GiB of disk, above
// the trial's.
func newManagerEnv(t *testing.T, mod func(*Config)) *testEnv {
	t.Helper()
	st := storetest.OpenBolt(t)
	m, err := manager.New(manager.Config{
		Backend: stubBackend{}, Store: st, Logger: slog.New(slog.DiscardHandler),
		DefaultVCPUs: 4, DefaultMemoryMiB: 8192, DiskMiB: 20 << 10,
		HostCPUs: 64, HostMemoryMiB: 1 << 20,
		DiskFree: func() (int64, error) { return 1 << 50, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	secret := "wr_" + randomHex()
	sum := sha256.Sum256([]byte(secret))
	if err := st.PutKey(t.Context(), store.Key{ID: "key-admin", Account: "admin", Kind: store.KeyAdmin, Hash: sum[:], CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Sandboxes: m, Store: st, DefaultConcurrency: m.DefaultConcurrency(),
		DefaultSize: Size{VCPUs: 4, MemoryMiB: 8192, DiskGiB: 20},
		Trial:       TrialConfig{Enabled: true},
	}
	if mod != nil {
		mod(&cfg)
	}
	srv := httptest.NewServer(NewServer(cfg))
	t.Cleanup(srv.Close)
	return &testEnv{t: t, url: srv.URL, store: st, keys: map[store.KeyKind]string{store.KeyAdmin: secret}}
}

// newTrial obtains a trial key, failing the test unless one is made.
func (e *testEnv) newTrial() api.Trial {
	e.t.Helper()
	resp := e.doJSON("POST", "/v1/trial", "", `{}`)
	wantStatus(e.t, resp, 201, "")
	var tr api.Trial
	decodeStrict(e.t, resp, &tr)
	return tr
}

// TestTrialSizeAndConcurrency: a trial's sandboxes are at most the trial's
// size, one created without a size gets the server's default cut to it,
// and a trial runs at most the trial's concurrency, while other accounts
// keep the server's default size.
func TestTrialSizeAndConcurrency(t *testing.T) {
	e := newManagerEnv(t, nil)
	tr := e.newTrial()
	for _, body := range []string{
		`{"vcpus":6,"memory_mib":16384,"disk_gib":100}`,
		`{"vcpus":4}`,
		`{"memory_mib":8192}`,
		`{"disk_gib":11}`,
	} {
		resp := e.doJSON("POST", "/v1/sandboxes", tr.Key, body)
		wantStatus(t, resp, 403, "forbidden")
	}
	var sizes []string
	for _, body := range []string{`{}`, `{"vcpus":2,"memory_mib":4096,"disk_gib":10}`, `{"vcpus":1,"memory_mib":512}`} {
		resp := e.doJSON("POST", "/v1/sandboxes", tr.Key, body)
		wantStatus(t, resp, 201, "")
		var sb api.Sandbox
		decodeStrict(t, resp, &sb)
		sizes = append(sizes, fmt.Sprintf("%dx%dx%d", sb.VCPUs, sb.MemoryMiB, sb.DiskGiB))
	}
	if want := fmt.Sprint([]string{"2x4096x10", "2x4096x10", "1x512x10"}); fmt.Sprint(sizes) != want {
		t.Errorf("trial sandboxes (vCPUs x MiB x GiB): got %v, want %s", sizes, want)
	}
	// The fourth at once is past the trial's concurrency.
	wantStatus(t, e.doJSON("POST", "/v1/sandboxes", tr.Key, `{}`), 429, "concurrency_limit_reached")

	// An account that is no trial gets the server's default size.
	admin := e.keys[store.KeyAdmin]
	wantStatus(t, e.doJSON("POST", "/v1/accounts", admin, `{"name":"team"}`), 201, "")
	resp := e.doJSON("POST", "/v1/keys", admin, `{"account":"team"}`)
	wantStatus(t, resp, 201, "")
	var k api.Key
	decodeStrict(t, resp, &k)
	resp = e.doJSON("POST", "/v1/sandboxes", k.Secret, `{}`)
	wantStatus(t, resp, 201, "")
	var sb api.Sandbox
	decodeStrict(t, resp, &sb)
	if sb.VCPUs != 4 || sb.MemoryMiB != 8192 || sb.DiskGiB != 20 {
		t.Errorf("another account's default: got %d vCPUs, %d MiB, %d GiB, want 4, 8192, 20", sb.VCPUs, sb.MemoryMiB, sb.DiskGiB)
	}
}

// TestTrialHoursBySize: a trial's hours are hours of the default size: a
// large sandbox uses them faster than it runs, a small one slower.
func TestTrialHoursBySize(t *testing.T) {
	e := newManagerEnv(t, func(c *Config) { c.Trial.Hours = 1 })
	big, small := e.newTrial(), e.newTrial()
	// Half an hour at 16 GiB is two trial hours; an hour and a half at
	// 1 GiB is three eighths of one.
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-01", Account: big.Account, KeyID: "k", AliveMs: 1_800_000, MemoryMiBMs: 16384 * 1_800_000})
	seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-01", Account: small.Account, KeyID: "k", AliveMs: 5_400_000, MemoryMiBMs: 1024 * 5_400_000})
	wantStatus(t, e.doJSON("POST", "/v1/sandboxes", big.Key, `{}`), 402, "trial_exhausted")
	wantStatus(t, e.doJSON("POST", "/v1/sandboxes", small.Key, `{}`), 201, "")

	resp := e.do("GET", "/v1/accounts", e.keys[store.KeyAdmin], nil)
	wantStatus(t, resp, 200, "")
	var list api.AccountList
	decodeStrict(t, resp, &list)
	got := map[string]float64{}
	for _, a := range list.Accounts {
		got[a.ID] = a.TrialUsedHours
	}
	if got[big.Account] != 2 || got[small.Account] != 0.375 {
		t.Errorf("trial_used_hours: got %v for the large one and %v for the small one, want 2 and 0.375", got[big.Account], got[small.Account])
	}
}

// fromAddr is a client whose connections come from ip, one of loopback's
// many addresses (127.0.0.0/8), as clients on other hosts would.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// trialFrom asks for a trial from ip and returns the response's status and
// code.
func trialFrom(t *testing.T, e *testEnv, ip string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", e.url+"/v1/trial", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := fromAddr(ip).Do(req)
	if err != nil {
		t.Fatalf("trial from %s: %v", ip, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 201 {
		return 201, "", resp.Header
	}
	return resp.StatusCode, errorOf(t, resp).Code, resp.Header
}

// TestTrialServerWide: trials from many addresses are bounded by the
// server's own count per window, and by the trial hours outstanding.
func TestTrialServerWide(t *testing.T) {
	t.Run("per window", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Trial = TrialConfig{Enabled: true, PerWindow: 3} })
		for i := 2; i <= 6; i++ {
			ip := "127.0.0." + strconv.Itoa(i)
			status, code, h := trialFrom(t, e, ip)
			want := 201
			if i > 4 {
				want = 429
			}
			if status != want {
				t.Errorf("trial from %s: got %d %s, want %d", ip, status, code, want)
			}
			if want == 429 {
				if s, err := strconv.Atoi(h.Get("Retry-After")); code != "rate_limited" || err != nil || s < 3500 || s > 3600 {
					t.Errorf("trial from %s: got %s, Retry-After %q, want rate_limited after about 3600", ip, code, h.Get("Retry-After"))
				}
			}
		}
		if n := trialAccounts(t, e); n != 3 {
			t.Errorf("trial accounts: got %d, want 3", n)
		}
	})
	t.Run("outstanding hours", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Trial = TrialConfig{Enabled: true, Hours: 10, OutstandingHours: 25} })
		// An old trial with its hours unused no longer holds new ones back.
		old := store.Account{ID: "trial-old", Name: "trial-old", CreatedAt: time.Now().Add(-31 * 24 * time.Hour), TrialSeconds: 1000 * 3600}
		if err := e.store.CreateAccount(t.Context(), old); err != nil {
			t.Fatal(err)
		}
		var first string
		for i, want := range []int{201, 201, 503} {
			ip := "127.0.1." + strconv.Itoa(i+1)
			status, code, _ := trialFrom(t, e, ip)
			if status != want || want == 503 && code != "capacity_exhausted" {
				t.Errorf("trial %d from %s: got %d %s, want %d", i, ip, status, code, want)
			}
			if i == 0 {
				first = newestTrial(t, e)
			}
		}
		// Once a trial has used its hours (by size: 10 hours of 4 GiB),
		// there is room again.
		seedUsage(t, e.store, store.UsageDelta{Day: "2026-03-01", Account: first, KeyID: "k", AliveMs: 36_000_000, MemoryMiBMs: 4096 * 36_000_000})
		if status, code, _ := trialFrom(t, e, "127.0.1.9"); status != 201 {
			t.Errorf("a trial once another's hours are used: got %d %s, want 201", status, code)
		}
	})
}

// trialAccounts counts the trial accounts of e's store.
func trialAccounts(t *testing.T, e *testEnv) int {
	t.Helper()
	accounts, err := e.store.ListAccounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range accounts {
		if a.TrialSeconds > 0 {
			n++
		}
	}
	return n
}

// newestTrial is the id of the trial account made last.
func newestTrial(t *testing.T, e *testEnv) string {
	t.Helper()
	accounts, err := e.store.ListAccounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var id string
	var at time.Time
	for _, a := range accounts {
		if a.TrialSeconds > 0 && a.CreatedAt.After(at) {
			id, at = a.ID, a.CreatedAt
		}
	}
	return id
}

// TestKeysBounded: an account holds at most MaxKeysPerAccount keys, its
// keys make at most as many a day (removed ones counted), a trial's make
// at most Trial.MaxKeys in all, and the admin key is bound by none.
func TestKeysBounded(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxKeysPerAccount = 5
		c.Trial = TrialConfig{Enabled: true}
	})
	withAcct1(t, e)
	full, admin := e.keys[store.KeyFull], e.keys[store.KeyAdmin]
	// acct1 holds three keys the admin made: two more, then it is full.
	a := e.mint(full, `{}`)
	e.mint(full, `{"kind":"read_only"}`)
	wantStatus(t, e.doJSON("POST", "/v1/keys", full, `{}`), 409, "conflict")

	// Removing one makes room, until the day's five are made.
	made := 2
	for made < 5 {
		wantStatus(t, e.do("DELETE", "/v1/keys/"+a.ID, full, nil), 204, "")
		a = e.mint(full, `{}`)
		made++
	}
	wantStatus(t, e.do("DELETE", "/v1/keys/"+a.ID, full, nil), 204, "")
	resp := e.doJSON("POST", "/v1/keys", full, `{}`)
	wantStatus(t, resp, 429, "rate_limited")
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 86000 || s > 86400 {
		t.Errorf("Retry-After: got %q, want about a day", resp.Header.Get("Retry-After"))
	}
	// The admin key makes acct1's keys regardless.
	e.mint(admin, `{"account":"acct1"}`)
	e.mint(admin, `{"account":"acct1"}`)
	if keys, _ := e.store.ListKeys(t.Context(), "acct1"); len(keys) != 6 {
		t.Errorf("acct1's keys: got %d, want 6", len(keys))
	}

	// A trial's key makes two, and no more even once they are removed.
	tr := e.newTrial()
	k1 := e.mint(tr.Key, `{}`)
	k2 := e.mint(k1.Secret, `{"kind":"read_only"}`)
	wantStatus(t, e.doJSON("POST", "/v1/keys", tr.Key, `{}`), 403, "forbidden")
	wantStatus(t, e.do("DELETE", "/v1/keys/"+k2.ID, tr.Key, nil), 204, "")
	wantStatus(t, e.doJSON("POST", "/v1/keys", tr.Key, `{}`), 403, "forbidden")
	wantStatus(t, e.do("DELETE", "/v1/keys/"+k1.ID, tr.Key, nil), 204, "")
	wantStatus(t, e.doJSON("POST", "/v1/keys", tr.Key, `{}`), 403, "forbidden")
	if keys, _ := e.store.ListAllKeys(t.Context(), tr.Account); len(keys) != 3 {
		t.Errorf("the trial's keys, removed ones included: got %d, want 3", len(keys))
	}
}

// TestKeysBoundedRace: keys made at once by many requests stay within the
// keys an account holds.
func TestKeysBoundedRace(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxKeysPerAccount = 6 })
	full := e.keys[store.KeyFull]
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(t.Context(), "POST", e.url+"/v1/keys", nil)
			req.Header.Set("Authorization", "Bearer "+full)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	made := 0
	for _, c := range codes {
		switch c {
		case 201:
			made++
		case 409:
		default:
			t.Errorf("a key made at once with others: got %d, want 201 or 409", c)
		}
	}
	keys, _ := e.store.ListKeys(t.Context(), "acct1")
	if made != 3 || len(keys) != 6 {
		t.Errorf("got %d made and %d held, want 3 and 6", made, len(keys))
	}
}
