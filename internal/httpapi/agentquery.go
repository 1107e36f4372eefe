package httpapi

import (
	"net/url"
	"strconv"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// checkListQuery checks the bounds a listing forwarded to the agent
// takes (?limit= of files/list, ?output= and ?running= of processes)
// before the agent sees them, so that a bad value is refused alike
// whatever agent the sandbox runs.
func checkListQuery(suffix string, q url.Values) error {
	switch suffix {
	case "/files/list":
		if v := q.Get("limit"); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > api.MaxListLimit {
				return sandbox.Errorf(sandbox.KindInvalid, "query parameter limit must be an integer from 1 to %d, not %q", api.MaxListLimit, v)
			}
		}
	case "/processes":
		for _, name := range []string{"output", "running"} {
			if v := q.Get(name); v != "" {
				if _, err := strconv.ParseBool(v); err != nil {
					return sandbox.Errorf(sandbox.KindInvalid, "query parameter %s must be true or false, not %q", name, v)
				}
			}
		}
	}
	return nil
}
