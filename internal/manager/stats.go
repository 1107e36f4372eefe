package manager

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// Per-sandbox metrics: every sandbox.MetricsInterval the manager asks each
// running sandbox's agent for what its kernel reports (GET /stats), takes
// the CPU from the backend's own counter where it meters one, and keeps
// the samples in memory for the sandbox's life: a series of at most
// maxSamples, which thins its older half when full, so a long life is
// kept at a coarser grain in bounded memory. They go when the sandbox
// ends (and with the process: they are for watching, not a ledger).

const (
	// maxSamples bounds one sandbox's series (about 12 hours at 5 s
	// before the first thinning).
	maxSamples = 8640
	// statsWait bounds one agent's answer; statsConcurrency the agents
	// asked at once.
	statsWait        = 2 * time.Second
	statsConcurrency = 8
	// statsAnswerMax bounds what is read of an agent's answer.
	statsAnswerMax = 16 << 10
)

type series struct {
	samples []sandbox.Metric
	// cpu and at are the last CPU reading (seconds) and when it was
	// taken, which the next sample's percentage is against.
	cpu float64
	at  time.Time
}

// statsStore holds the series by sandbox id.
type statsStore struct {
	mu sync.Mutex
	by map[string]*series
}

func (s *statsStore) add(id string, m sandbox.Metric, cpu float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*series{}
	}
	sr := s.by[id]
	if sr == nil {
		sr = &series{}
		s.by[id] = sr
	}
	if !sr.at.IsZero() && m.CPUCount > 0 {
		if dt := m.Timestamp.Sub(sr.at).Seconds(); dt > 0 && cpu >= sr.cpu {
			m.CPUUsedPct = min(100, (cpu-sr.cpu)/dt/float64(m.CPUCount)*100)
		}
	}
	sr.cpu, sr.at = cpu, m.Timestamp
	if len(sr.samples) >= maxSamples {
		sr.samples = thin(sr.samples)
	}
	sr.samples = append(sr.samples, m)
}

// thin drops every other sample of the older half.
func thin(s []sandbox.Metric) []sandbox.Metric {
	half := len(s) / 2
	out := make([]sandbox.Metric, 0, maxSamples)
	for i := 0; i < half; i += 2 {
		out = append(out, s[i])
	}
	return append(out, s[half:]...)
}

func (s *statsStore) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, id)
}

// get returns the samples from start to end (zero: open), oldest first.
func (s *statsStore) get(id string, start, end time.Time) []sandbox.Metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []sandbox.Metric{}
	if sr := s.by[id]; sr != nil {
		for _, m := range sr.samples {
			if (start.IsZero() || !m.Timestamp.Before(start)) && (end.IsZero() || !m.Timestamp.After(end)) {
				out = append(out, m)
			}
		}
	}
	return out
}

// Metrics returns the samples of a sandbox of account from start to end
// (zero times: its whole life so far).
func (m *Manager) Metrics(ctx context.Context, account, id string, start, end time.Time) ([]sandbox.Metric, error) {
	if _, err := m.get(ctx, account, id); err != nil {
		return nil, err
	}
	return m.stats.get(id, start, end), nil
}

// sampleStats takes one sample of every running sandbox.
func (m *Manager) sampleStats(ctx context.Context) {
	type target struct {
		id string
		t  http.RoundTripper
	}
	var targets []target
	m.mu.Lock()
	for id, e := range m.live {
		if e.inst != nil && e.transport != nil && !e.frozen {
			targets = append(targets, target{id, e.transport})
		}
	}
	m.mu.Unlock()
	meter := m.backend().Supports(sandbox.CapMeter)
	sem := make(chan struct{}, statsConcurrency)
	var wg sync.WaitGroup
	for _, tg := range targets {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := agentStats(ctx, tg.t)
			if err != nil {
				return // stopped, paused or busy: no sample this time
			}
			cpu := st.CPUSeconds
			if meter {
				if d, err := m.backend().CPUTime(tg.id); err == nil {
					cpu = d.Seconds()
				}
			}
			// The cost so far is the record's, which the meter keeps
			// (every MeterInterval): the chart of cost and the bill are
			// one figure.
			var cost int64
			if rec, err := m.cfg.Store.GetSandbox(ctx, tg.id); err == nil {
				cost = rec.Usage.CostNanos
			}
			m.stats.add(tg.id, sandbox.Metric{
				Timestamp: m.now().UTC(), CPUCount: st.CPUCount, CostNanos: cost,
				MemUsed: st.MemUsed, MemTotal: st.MemTotal, DiskUsed: st.DiskUsed, DiskTotal: st.DiskTotal,
				NetRx: st.NetRx, NetTx: st.NetTx,
			}, cpu)
		}()
	}
	wg.Wait()
}

// agentAnswer is the agent's GET /stats (api.AgentStats: the API's wire
// types are not imported here).
type agentAnswer struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUCount   int     `json:"cpu_count"`
	MemUsed    int64   `json:"mem_used_bytes"`
	MemTotal   int64   `json:"mem_total_bytes"`
	DiskUsed   int64   `json:"disk_used_bytes"`
	DiskTotal  int64   `json:"disk_total_bytes"`
	NetRx      int64   `json:"net_rx_bytes"`
	NetTx      int64   `json:"net_tx_bytes"`
}

// agentStats asks an agent for its sandbox's figures.
func agentStats(ctx context.Context, t http.RoundTripper) (agentAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, statsWait)
	defer cancel()
	var st agentAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox-agent/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, errStats
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, statsAnswerMax)).Decode(&st); err != nil {
		return st, err
	}
	// Root inside writes the agent: figures that cannot be are dropped.
	if st.CPUCount < 0 || st.CPUCount > 1024 || st.MemUsed < 0 || st.MemTotal < 0 || st.DiskUsed < 0 || st.DiskTotal < 0 || st.NetRx < 0 || st.NetTx < 0 || st.CPUSeconds < 0 {
		return st, errStats
	}
	return st, nil
}

var errStats = sandbox.Errorf(sandbox.KindInternal, "the agent's stats did not read")
