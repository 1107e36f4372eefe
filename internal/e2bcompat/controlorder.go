package e2bcompat

import (
	"encoding/base64"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

const (
	// maxOrdered is the most sandboxes a listing oldest first or by start
	// time reads: withruntime's own API lists newest first only, so such a
	// listing reads every match before it answers a page.
	maxOrdered = 10000
	// defaultE2BLimit is the page size E2B's list answers by default.
	defaultE2BLimit = 100
)

// listOrdered answers a listing withruntime's API cannot page by itself:
// oldest first (order=asc) or only sandboxes started at or after a time
// (startedAfter), as E2B's list does. It reads every matching sandbox
// (at most maxOrdered), keeps those started at or after after, orders them
// by start time (ties by id) and answers the page after o.PageToken, which
// here is a mark of its own: the last start time and id answered.
func (s *Server) listOrdered(w http.ResponseWriter, r *http.Request, c *client.Client, key string, o client.ListOptions, asc bool, after time.Time) error {
	limit := o.Limit
	if limit == 0 {
		limit = defaultE2BLimit
	}
	var mark *orderMark
	if o.PageToken != "" {
		m, ok := parseOrderMark(o.PageToken)
		if !ok {
			return &Error{Status: http.StatusBadRequest, Message: "nextToken is not one this listing answered"}
		}
		mark = &m
	}
	o.PageToken, o.Limit = "", 1000
	var all []api.Sandbox
	for {
		page, err := c.ListSandboxesPage(r.Context(), o)
		if err != nil {
			return err
		}
		for _, sb := range page.Sandboxes {
			if !startedAt(&sb).Before(after) {
				all = append(all, sb)
			}
		}
		if len(all) > maxOrdered {
			return &Error{Status: http.StatusBadRequest, Message: "more than 10000 sandboxes match: narrow the listing (metadata, state, startedAfter) to order it"}
		}
		if page.NextPageToken == "" {
			break
		}
		o.PageToken = page.NextPageToken
	}
	less := func(a, b orderMark) bool {
		if !a.started.Equal(b.started) {
			return a.started.Before(b.started) == asc
		}
		return (a.id < b.id) == asc
	}
	sort.Slice(all, func(i, j int) bool { return less(markOf(&all[i]), markOf(&all[j])) })
	if mark != nil {
		i := sort.Search(len(all), func(i int) bool { return less(*mark, markOf(&all[i])) })
		all = all[i:]
	}
	out := make([]sandboxDetail, 0, min(limit, len(all)))
	for i := 0; i < len(all) && i < limit; i++ {
		out = append(out, s.detailOf(&all[i], key, false))
	}
	if len(all) > limit {
		w.Header().Set("x-next-token", markOf(&all[limit-1]).token())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// startedAt is when a sandbox started, as its detail reports it.
func startedAt(sb *api.Sandbox) time.Time {
	if sb.StartedAt != nil {
		return *sb.StartedAt
	}
	return sb.CreatedAt
}

// orderMark is a position in a listing by start time.
type orderMark struct {
	started time.Time
	id      string
}

func markOf(sb *api.Sandbox) orderMark { return orderMark{started: startedAt(sb), id: sb.ID} }

func (m orderMark) token() string {
	return "o" + base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(m.started.UnixNano(), 10)+" "+m.id))
}

func parseOrderMark(tok string) (orderMark, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "o"))
	if err != nil || !strings.HasPrefix(tok, "o") {
		return orderMark{}, false
	}
	ns, id, ok := strings.Cut(string(raw), " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return orderMark{}, false
	}
	return orderMark{started: time.Unix(0, n), id: id}, true
}
