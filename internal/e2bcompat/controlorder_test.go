package e2bcompat

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// pagedList is withruntime's listing, newest first, paged by offset (as a
// string token) at most 2 sandboxes a page, whatever the limit asked.
type pagedList []api.Sandbox

func (l pagedList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	answer, fail := answering(w)
	if r.Header.Get("Authorization") != "Bearer wr_good" || r.URL.Path != "/v1/sandboxes" {
		fail(404, "not_found")
		return
	}
	off, _ := strconv.Atoi(r.URL.Query().Get("page_token"))
	end := min(off+2, len(l))
	out := api.SandboxList{Sandboxes: l[off:end]}
	if end < len(l) {
		out.NextPageToken = strconv.Itoa(end)
	}
	answer(200, out)
}

func TestControlListOrdered(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	var l pagedList
	for i := 4; i >= 0; i-- { // newest first
		l = append(l, api.Sandbox{ID: "sbx" + strconv.Itoa(i), State: "running", CreatedAt: t0.Add(time.Duration(i) * time.Second), LeaseEndsAt: t0.Add(time.Hour)})
	}
	s, err := New(Config{API: l, Secret: bytes.Repeat([]byte{9}, SecretSize)})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(q string) ([]string, string) {
		t.Helper()
		status, h, body := call(s, "wr_good", "GET", "/v2/sandboxes?"+q, ``)
		var got []sandboxDetail
		if status != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("%s: got %d %s", q, status, body)
		}
		var out []string
		for _, d := range got {
			out = append(out, d.SandboxID)
		}
		return out, h.Get("x-next-token")
	}
	// Oldest first, across withruntime's pages, then paged by E2B's limit.
	var all []string
	q := "order=asc&limit=2"
	for {
		got, next := ids(q)
		all = append(all, got...)
		if next == "" {
			break
		}
		q = "order=asc&limit=2&nextToken=" + url.QueryEscape(next)
	}
	if strings.Join(all, ",") != "sbx0,sbx1,sbx2,sbx3,sbx4" {
		t.Errorf("order=asc: got %v", all)
	}
	// startedAfter keeps those started at or after it, newest first by default.
	after := url.QueryEscape(t0.Add(2 * time.Second).Format(time.RFC3339Nano))
	if got, next := ids("startedAfter=" + after); strings.Join(got, ",") != "sbx4,sbx3,sbx2" || next != "" {
		t.Errorf("startedAfter: got %v (next %q)", got, next)
	}
	if got, _ := ids("order=asc&startedAfter=" + after); strings.Join(got, ",") != "sbx2,sbx3,sbx4" {
		t.Errorf("order=asc&startedAfter: got %v", got)
	}
	for _, bad := range []string{"order=sideways", "startedAfter=yesterday", "order=asc&nextToken=p2"} {
		if status, _, _ := call(s, "wr_good", "GET", "/v2/sandboxes?"+bad, ``); status != 400 {
			t.Errorf("%s: got %d, want 400", bad, status)
		}
	}
}
