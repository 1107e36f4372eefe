package httpapi

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/store"
)

// mint creates a key with the key secret and returns it (its status must
// be 201).
func (e *testEnv) mint(secret, body string) api.Key {
	e.t.Helper()
	resp := e.doJSON("POST", "/v1/keys", secret, body)
	wantStatus(e.t, resp, 201, "")
	var k api.Key
	decodeStrict(e.t, resp, &k)
	return k
}

// withAcct1 makes acct1 an account, so that the admin key may name it.
func withAcct1(t *testing.T, e *testEnv) {
	t.Helper()
	if err := e.store.PutAccount(t.Context(), store.Account{ID: "acct1", Name: "acct1"}); err != nil {
		t.Fatal(err)
	}
}

func TestKeysMintNoMoreThanTheyHave(t *testing.T) {
	e := newEnv(t, nil)
	withAcct1(t, e)
	admin, full := e.keys[store.KeyAdmin], e.keys[store.KeyFull]
	limited := e.mint(admin, `{"account":"acct1","daily_limit_micros":100}`)
	if limited.Parent != "" {
		t.Fatalf("a key the admin key made: got parent %q, want none", limited.Parent)
	}
	child := e.mint(limited.Secret, `{"daily_limit_micros":50}`)
	roChild := e.mint(limited.Secret, `{"kind":"read_only"}`)
	// A key stored with no limit of its own under a limited one (a request
	// cannot make one: it would inherit the limit).
	secret := "wr_" + randomHex()
	sum := sha256.Sum256([]byte(secret))
	bare := store.Key{ID: "key-bare", Account: "acct1", Kind: store.KeyFull, Hash: sum[:], Parent: limited.ID, CreatedAt: time.Now()}
	if err := e.store.PutKey(t.Context(), bare); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, key, body string
		wantStatus      int
		wantCode        string
		wantParent      string
		wantLimit       int64
	}{
		{"a limited key asks for no limit", limited.Secret, `{"kind":"full"}`, 201, "", limited.ID, 100},
		{"a limited key asks for 0 (no limit)", limited.Secret, `{"daily_limit_micros":0}`, 201, "", limited.ID, 100},
		{"a limited key asks for less", limited.Secret, `{"daily_limit_micros":40}`, 201, "", limited.ID, 40},
		{"a limited key asks for as much", limited.Secret, `{"daily_limit_micros":100}`, 201, "", limited.ID, 100},
		{"a limited key asks for more", limited.Secret, `{"daily_limit_micros":101}`, 403, "forbidden", "", 0},
		{"a limited key asks for an admin key", limited.Secret, `{"kind":"admin"}`, 403, "forbidden", "", 0},
		{"a limited read-only key", limited.Secret, `{"kind":"read_only"}`, 201, "", limited.ID, 100},
		{"a grandchild with no limit asked", child.Secret, `{}`, 201, "", child.ID, 50},
		{"a grandchild above its parent", child.Secret, `{"daily_limit_micros":60}`, 403, "forbidden", "", 0},
		{"a grandchild above its grandparent", child.Secret, `{"daily_limit_micros":1000}`, 403, "forbidden", "", 0},
		{"a key bound only by its parent asks for no limit", secret, `{}`, 201, "", bare.ID, 100},
		{"a key bound only by its parent asks for more", secret, `{"daily_limit_micros":500}`, 403, "forbidden", "", 0},
		{"read-only makes nothing", roChild.Secret, `{"kind":"read_only"}`, 403, "forbidden", "", 0},
		{"an unlimited key sets any limit", full, `{"daily_limit_micros":1000000}`, 201, "", "key-1", 1000000},
		{"an unlimited key asks for none", full, `{}`, 201, "", "key-1", 0},
		{"the admin key's keys answer to none", admin, `{"account":"acct1","daily_limit_micros":7}`, 201, "", "", 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := e.store.ListKeys(t.Context(), "")
			resp := e.doJSON("POST", "/v1/keys", tt.key, tt.body)
			wantStatus(t, resp, tt.wantStatus, tt.wantCode)
			if tt.wantStatus != 201 {
				if after, _ := e.store.ListKeys(t.Context(), ""); len(after) != len(before) {
					t.Errorf("a refused request made a key: %d keys, want %d", len(after), len(before))
				}
				return
			}
			var k api.Key
			decodeStrict(t, resp, &k)
			if k.Parent != tt.wantParent || k.DailyLimitMicros != tt.wantLimit || k.Account != "acct1" {
				t.Errorf("got parent %q limit %d account %s, want parent %q limit %d account acct1", k.Parent, k.DailyLimitMicros, k.Account, tt.wantParent, tt.wantLimit)
			}
			stored, _ := e.store.ListKeys(t.Context(), "acct1")
			for _, s := range stored {
				if s.ID == k.ID && (s.Parent != tt.wantParent || s.DailyLimitMicros != tt.wantLimit) {
					t.Errorf("stored: got parent %q limit %d, want %q and %d", s.Parent, s.DailyLimitMicros, tt.wantParent, tt.wantLimit)
				}
			}
		})
	}
}

func TestKeyRemovalFollowsTheFamily(t *testing.T) {
	e := newEnv(t, nil)
	withAcct1(t, e)
	admin, full := e.keys[store.KeyAdmin], e.keys[store.KeyFull]
	top := e.mint(admin, `{"account":"acct1","daily_limit_micros":100}`)
	child := e.mint(top.Secret, `{}`)
	sibling := e.mint(top.Secret, `{}`)
	grandchild := e.mint(child.Secret, `{}`)
	other := e.mint(full, `{}`)

	tests := []struct {
		name, key, target string
		wantStatus        int
		wantCode          string
	}{
		{"a child cannot remove its parent", child.Secret, top.ID, 403, "forbidden"},
		{"nor its sibling", child.Secret, sibling.ID, 403, "forbidden"},
		{"nor a key the admin key made", child.Secret, "key-1", 403, "forbidden"},
		{"nor a key of another family", grandchild.Secret, other.ID, 403, "forbidden"},
		{"a key the admin key made removes its account's keys", full, other.ID, 204, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantStatus(t, e.do("DELETE", "/v1/keys/"+tt.target, tt.key, nil), tt.wantStatus, tt.wantCode)
		})
	}
	// Removing a key removes the keys made through it, and only them.
	wantStatus(t, e.do("DELETE", "/v1/keys/"+child.ID, top.Secret, nil), 204, "")
	for _, k := range []struct {
		key  api.Key
		want int
	}{{child, 401}, {grandchild, 401}, {sibling, 200}, {top, 200}} {
		if resp := e.do("GET", "/v1/keys", k.key.Secret, nil); resp.StatusCode != k.want {
			t.Errorf("key %s after removing %s: got %d, want %d", k.key.ID, child.ID, resp.StatusCode, k.want)
		}
	}
	// A key removes itself.
	wantStatus(t, e.do("DELETE", "/v1/keys/"+sibling.ID, sibling.Secret, nil), 204, "")
	all, _ := e.store.ListAllKeys(t.Context(), "acct1")
	removed := 0
	for _, k := range all {
		if k.RemovedAt != nil {
			removed++
		}
	}
	if removed != 4 { // other, child, grandchild, sibling
		t.Errorf("removed keys kept: got %d, want 4", removed)
	}
}

// TestAnotherAccountIsOneAnswer holds the API to one answer for every
// account a non-admin key may not name, existing or not.
func TestAnotherAccountIsOneAnswer(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.store.PutAccount(t.Context(), store.Account{ID: "acct2", Name: "acct2"}); err != nil {
		t.Fatal(err)
	}
	read := func(resp *http.Response) (int, string) {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, method, pathFmt, bodyFmt string
		kind                           store.KeyKind
	}{
		{"create a key", "POST", "/v1/keys", `{"account":%q}`, store.KeyFull},
		{"list keys", "GET", "/v1/keys?account=%s", "", store.KeyFull},
		{"list keys read-only", "GET", "/v1/keys?account=%s", "", store.KeyReadOnly},
		{"usage", "GET", "/v1/usage?account=%s", "", store.KeyFull},
		{"usage read-only", "GET", "/v1/usage?account=%s", "", store.KeyReadOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var answers [2]string
			for i, name := range []string{"acct2", "nobody"} {
				path, body := tt.pathFmt, ""
				if tt.bodyFmt != "" {
					body = fmt.Sprintf(tt.bodyFmt, name)
				} else {
					path = fmt.Sprintf(tt.pathFmt, name)
				}
				var resp *http.Response
				if body != "" {
					resp = e.doJSON(tt.method, path, e.keys[tt.kind], body)
				} else {
					resp = e.do(tt.method, path, e.keys[tt.kind], nil)
				}
				status, text := read(resp)
				if status != 403 {
					t.Errorf("account %s: got %d %s, want 403", name, status, text)
				}
				answers[i] = text
			}
			if answers[0] != answers[1] {
				t.Errorf("an existing and a missing account answer differently: %q and %q", answers[0], answers[1])
			}
		})
	}
}
