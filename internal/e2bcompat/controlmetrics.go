package e2bcompat

import (
	"net/http"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/client"
)

// sandboxMetric is one sample as E2B's control API answers it (its
// SandboxMetric). The clients require every field.
type sandboxMetric struct {
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       int64   `json:"memUsed"`
	MemTotal      int64   `json:"memTotal"`
	// MemCache is the page cache, which withruntime's agent does not
	// read: always 0 (the clients require the field).
	MemCache  int64 `json:"memCache"`
	DiskUsed  int64 `json:"diskUsed"`
	DiskTotal int64 `json:"diskTotal"`
}

// sandboxMetrics is GET /sandboxes/{id}/metrics (getMetrics): withruntime's
// samples of the sandbox, taken every 5 seconds, from start to end (Unix
// seconds, as the clients send them; absent: open), oldest first. Its
// times keep microseconds: the Python client parses no finer.
func (s *Server) sandboxMetrics(w http.ResponseWriter, r *http.Request, c *client.Client, _ string) error {
	id := r.PathValue("id")
	var bounds [2]time.Time
	for i, name := range []string{"start", "end"} {
		v := r.URL.Query().Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n >= 1<<40 {
			return &Error{Status: http.StatusBadRequest, Message: name + " must be Unix seconds, not " + strconv.Quote(v)}
		}
		bounds[i] = time.Unix(n, 0)
	}
	if !bounds[0].IsZero() && !bounds[1].IsZero() && bounds[1].Before(bounds[0]) {
		return &Error{Status: http.StatusBadRequest, Message: "end is before start"}
	}
	// An ended sandbox is not found, as E2B has it.
	if _, err := s.live(r, c, id); err != nil {
		return err
	}
	// The bounds are whole seconds: end covers its whole second.
	if !bounds[1].IsZero() {
		bounds[1] = bounds[1].Add(time.Second - time.Nanosecond)
	}
	ms, err := c.SandboxMetrics(r.Context(), id, bounds[0], bounds[1])
	if err != nil {
		return err
	}
	out := make([]sandboxMetric, 0, len(ms))
	for _, m := range ms {
		out = append(out, sandboxMetric{
			Timestamp:     m.Timestamp.UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
			TimestampUnix: m.Timestamp.Unix(),
			CPUCount:      m.CPUCount,
			CPUUsedPct:    m.CPUUsedPct,
			MemUsed:       m.MemUsed,
			MemTotal:      m.MemTotal,
			DiskUsed:      m.DiskUsed,
			DiskTotal:     m.DiskTotal,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
