package httpapi

import (
	"cmp"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Listing of GET /v1/sandboxes.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
	// recentEnded is how long an ended sandbox stays in the default
	// listing; all=true lists every one.
	recentEnded = 24 * time.Hour
	// maxMetadataFilters bounds the metadata=KEY=VALUE parameters.
	maxMetadataFilters = 16
)

// listQuery is what GET /v1/sandboxes asks for.
type listQuery struct {
	states   []sandbox.State // empty: every state
	metadata map[string]string
	limit    int
	all      bool
	after    *pageMark // the last sandbox of the previous page
}

// pageMark is a position in the newest-first order.
type pageMark struct {
	created time.Time
	id      string
}

func (p pageMark) token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(p.created.UnixNano(), 10) + ":" + p.id))
}

func parsePageToken(s string) (*pageMark, error) {
	bad := sandbox.Errorf(sandbox.KindInvalid, "page_token is not one this server gave")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) > 100 {
		return nil, bad
	}
	ns, id, ok := strings.Cut(string(raw), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, bad
	}
	return &pageMark{created: time.Unix(0, n).UTC(), id: id}, nil
}

// parseListQuery checks the query of GET /v1/sandboxes.
func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{limit: defaultListLimit, metadata: map[string]string{}}
	for name, vs := range q {
		if name != "metadata" && len(vs) > 1 {
			return lq, sandbox.Errorf(sandbox.KindInvalid, "query parameter %s is given %d times", name, len(vs))
		}
		switch name {
		case "state":
			for _, s := range strings.Split(vs[0], ",") {
				st := sandbox.State(s)
				switch st {
				case sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused, sandbox.StateEnded:
					lq.states = append(lq.states, st)
				default:
					return lq, sandbox.Errorf(sandbox.KindInvalid, "state must be starting, running, paused or ended (comma-separated), not %q", s)
				}
			}
		case "metadata":
			if len(vs) > maxMetadataFilters {
				return lq, sandbox.Errorf(sandbox.KindInvalid, "at most %d metadata filters", maxMetadataFilters)
			}
			for _, v := range vs {
				k, val, ok := strings.Cut(v, "=")
				if !ok || k == "" {
					return lq, sandbox.Errorf(sandbox.KindInvalid, "metadata must be KEY=VALUE, not %q", v)
				}
				lq.metadata[k] = val
			}
		case "limit":
			n, err := strconv.Atoi(vs[0])
			if err != nil || n < 1 || n > maxListLimit {
				return lq, sandbox.Errorf(sandbox.KindInvalid, "limit must be an integer from 1 to %d, not %q", maxListLimit, vs[0])
			}
			lq.limit = n
		case "page_token":
			if vs[0] == "" {
				continue // the first page
			}
			p, err := parsePageToken(vs[0])
			if err != nil {
				return lq, err
			}
			lq.after = p
		case "all":
			b, err := strconv.ParseBool(vs[0])
			if err != nil {
				return lq, sandbox.Errorf(sandbox.KindInvalid, "all must be true or false, not %q", vs[0])
			}
			lq.all = b
		default:
			return lq, sandbox.Errorf(sandbox.KindInvalid, "unknown query parameter %q", name)
		}
	}
	return lq, nil
}

// page filters recs, orders them newest first and cuts one page; next is
// the token of the following page, empty at the end.
func (lq listQuery) page(recs []*sandbox.Record, now time.Time) (out []*sandbox.Record, next string) {
	keep := recs[:0:0]
	for _, r := range recs {
		if lq.matches(r, now) {
			keep = append(keep, r)
		}
	}
	slices.SortFunc(keep, func(a, b *sandbox.Record) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if lq.after != nil {
		i, _ := slices.BinarySearchFunc(keep, *lq.after, func(r *sandbox.Record, p pageMark) int {
			if c := p.created.Compare(r.CreatedAt); c != 0 {
				return c
			}
			return cmp.Compare(p.id, r.ID)
		})
		for i < len(keep) && keep[i].CreatedAt.Equal(lq.after.created) && keep[i].ID == lq.after.id {
			i++
		}
		keep = keep[i:]
	}
	if len(keep) > lq.limit {
		last := keep[lq.limit-1]
		return keep[:lq.limit], pageMark{created: last.CreatedAt, id: last.ID}.token()
	}
	return keep, ""
}

func (lq listQuery) matches(r *sandbox.Record, now time.Time) bool {
	if len(lq.states) > 0 && !slices.Contains(lq.states, r.State) {
		return false
	}
	if r.State == sandbox.StateEnded && !lq.all && r.EndedAt != nil && now.Sub(*r.EndedAt) > recentEnded {
		return false
	}
	for k, v := range lq.metadata {
		if got, ok := r.Spec.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}
