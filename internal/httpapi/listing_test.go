package httpapi

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

func TestParseListQueryRefuses(t *testing.T) {
	tests := []struct{ name, query, want string }{
		{"unknown parameter", "sort=asc", "unknown query parameter"},
		{"unknown state", "state=running,dead", "state must be"},
		{"limit zero", "limit=0", "limit must be"},
		{"limit too big", "limit=1001", "limit must be"},
		{"limit not a number", "limit=ten", "limit must be"},
		{"bad token", "page_token=%21%21", "page_token"},
		{"forged token", "page_token=" + url.QueryEscape("bm90LWEtdG9rZW4"), "page_token"},
		{"metadata without =", "metadata=task", "metadata must be KEY=VALUE"},
		{"repeated state", "state=running&state=paused", "given 2 times"},
		{"all not a bool", "all=yes please", "all must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			_, err := parseListQuery(q)
			if err == nil || !strings.Contains(err.Error(), tt.want) || sandbox.KindOf(err) != sandbox.KindInvalid {
				t.Fatalf("got %v, want an invalid_request error with %q", err, tt.want)
			}
		})
	}
}

func TestListPages(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ended := func(ago time.Duration) *time.Time { e := now.Add(-ago); return &e }
	var recs []*sandbox.Record
	for i := range 7 {
		// Two share a creation instant: the order breaks ties by id.
		created := now.Add(-time.Duration(i/2*2) * time.Minute)
		recs = append(recs, &sandbox.Record{ID: fmt.Sprintf("sbx%d", i), State: sandbox.StateRunning, CreatedAt: created,
			Spec: sandbox.Spec{Metadata: map[string]string{"task": fmt.Sprint(i % 2)}}})
	}
	recs = append(recs,
		&sandbox.Record{ID: "sbxrecent", State: sandbox.StateEnded, CreatedAt: now.Add(-time.Hour), EndedAt: ended(time.Hour)},
		&sandbox.Record{ID: "sbxold", State: sandbox.StateEnded, CreatedAt: now.Add(-72 * time.Hour), EndedAt: ended(48 * time.Hour)},
	)
	ids := func(rs []*sandbox.Record) string {
		var s []string
		for _, r := range rs {
			s = append(s, r.ID)
		}
		return strings.Join(s, " ")
	}
	list := func(query string) (string, string) {
		q, _ := url.ParseQuery(query)
		lq, err := parseListQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		out, next := lq.page(recs, now)
		return ids(out), next
	}
	if got, _ := list(""); got != "sbx1 sbx0 sbx3 sbx2 sbx5 sbx4 sbx6 sbxrecent" {
		t.Errorf("default: got %q, want newest first, ties by id, ended only if recent", got)
	}
	if got, _ := list("all=true&state=ended"); got != "sbxrecent sbxold" {
		t.Errorf("all ended: got %q", got)
	}
	if got, _ := list("metadata=task%3D1"); got != "sbx1 sbx3 sbx5" {
		t.Errorf("metadata task=1: got %q", got)
	}
	// Pages of 3 walk the whole listing once, across a tie.
	var walked []string
	token := ""
	for range 10 {
		got, next := list("limit=3&page_token=" + url.QueryEscape(token)) // empty: the first page
		walked = append(walked, got)
		if next == "" {
			break
		}
		token = next
	}
	if got := strings.Join(walked, " | "); got != "sbx1 sbx0 sbx3 | sbx2 sbx5 sbx4 | sbx6 sbxrecent" {
		t.Errorf("pages: got %q", got)
	}
}
