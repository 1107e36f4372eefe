package e2bcompat

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/client"
)

// list is GET /v2/sandboxes (and /sandboxes): the running and paused
// sandboxes, newest first, a page at a time (x-next-token names the next).
func (s *Server) list(w http.ResponseWriter, r *http.Request, c *client.Client, key string) error {
	q := r.URL.Query()
	o := client.ListOptions{States: []string{"starting", "running", "paused"}, PageToken: q.Get("nextToken")}
	if v := q.Get("state"); v != "" {
		o.States = nil
		for _, st := range strings.Split(v, ",") {
			switch strings.TrimSpace(st) {
			case "running":
				o.States = append(o.States, "starting", "running")
			case "paused":
				o.States = append(o.States, "paused")
			default:
				return &Error{Status: http.StatusBadRequest, Message: "state must be running or paused (comma-separated), not " + st}
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return &Error{Status: http.StatusBadRequest, Message: "limit must be a positive integer, not " + v}
		}
		o.Limit = n
	}
	md, err := metadataQuery(q["metadata"])
	if err != nil {
		return err
	}
	o.Metadata = md
	var after time.Time
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return &Error{Status: http.StatusBadRequest, Message: "startedAfter must be an RFC 3339 time, not " + v}
		}
		after = t
	}
	asc := false
	switch v := q.Get("order"); strings.ToLower(v) {
	case "", "desc":
	case "asc":
		asc = true
	default:
		return &Error{Status: http.StatusBadRequest, Message: "order must be asc or desc, not " + v}
	}
	if v := q.Get("template"); v != "" && !templates[v] {
		// Every sandbox is of the one image the known templates name.
		writeJSON(w, http.StatusOK, []sandboxDetail{})
		return nil
	}
	if asc || !after.IsZero() {
		return s.listOrdered(w, r, c, key, o, asc, after)
	}
	page, err := c.ListSandboxesPage(r.Context(), o)
	if err != nil {
		return err
	}
	out := make([]sandboxDetail, 0, len(page.Sandboxes))
	for i := range page.Sandboxes {
		out = append(out, s.detailOf(&page.Sandboxes[i], key, false))
	}
	if page.NextPageToken != "" {
		w.Header().Set("x-next-token", page.NextPageToken)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// metadataQuery decodes E2B's metadata filter: one parameter holding a
// query string whose keys and values were each percent-encoded first, so
// they are decoded twice.
func metadataQuery(params []string) (map[string]string, error) {
	md := map[string]string{}
	for _, p := range params {
		pairs, err := url.ParseQuery(p)
		if err != nil {
			return nil, &Error{Status: http.StatusBadRequest, Message: "metadata: " + err.Error()}
		}
		for k, vs := range pairs {
			dk, err := url.PathUnescape(k)
			if err != nil {
				return nil, &Error{Status: http.StatusBadRequest, Message: "metadata key: " + err.Error()}
			}
			for _, v := range vs {
				dv, err := url.PathUnescape(v)
				if err != nil {
					return nil, &Error{Status: http.StatusBadRequest, Message: "metadata value: " + err.Error()}
				}
				md[dk] = dv
			}
		}
	}
	return md, nil
}
