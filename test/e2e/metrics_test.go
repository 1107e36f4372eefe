package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestSandboxMetrics: a sandbox that writes a 64 MiB file, spins a CPU
// and holds 300 MiB shows all three in its samples (taken every 5 s),
// within its sizes; its cost so far grows from sample to sample and
// agrees with its record's; an ended one has none.
func TestSandboxMetrics(t *testing.T) {
	s := testenv.StartServer(t)
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSandbox(t.Context(), api.CreateSandboxRequest{VCPUs: 2, MemoryMiB: 1024, TimeoutSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StopSandbox(t.Context(), sb.ID) })
	if _, err := c.StartProcess(t.Context(), sb.ID, api.ExecRequest{
		Cmd:        api.Command{Argv: []string{"python3", "-c", "open('/workspace/blob', 'wb').write(bytes(64 << 20))\nb = bytearray(300 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"}},
		Background: true,
	}); err != nil {
		t.Fatal(err)
	}
	metrics := func() []api.SandboxMetric {
		code, body := call(t, s, s.Key, http.MethodGet, "/v1/sandboxes/"+sb.ID+"/metrics", nil)
		if code != http.StatusOK {
			t.Fatalf("metrics: %d %s", code, body)
		}
		var m api.SandboxMetrics
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		return m.Metrics
	}
	var busy *api.SandboxMetric
	deadline := time.Now().Add(45 * time.Second)
	for busy == nil && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		for _, m := range metrics() {
			if m.CPUUsedPct >= 30 && m.MemUsed >= 300<<20 && m.DiskUsed >= 64<<20 {
				busy = &m
			}
		}
	}
	if busy == nil {
		t.Fatalf("no sample shows the spinning CPU, the 300 MiB and the 64 MiB file: %+v", metrics())
	}
	if busy.CPUCount != 2 || busy.MemTotal < busy.MemUsed || busy.DiskTotal <= 0 || busy.DiskUsed <= 0 || busy.CPUUsedPct > 100 {
		t.Errorf("sample %+v: want 2 CPUs, memory used within the total, a disk", *busy)
	}
	// The cost so far: never falling, growing over the samples (1 GiB
	// costs about 11 micros every 5 s), and the record's own figure: no
	// sample ahead of the record read after it, none behind the record
	// read before it was taken.
	before, err := c.GetSandbox(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	readAt := time.Now()
	time.Sleep(6 * time.Second)
	ms := metrics()
	after, err := c.GetSandbox(t.Context(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if i > 0 && m.CostMicros < ms[i-1].CostMicros {
			t.Errorf("sample %d's cost %d is below the one before's, %d", i, m.CostMicros, ms[i-1].CostMicros)
		}
		if m.CostMicros > after.CostMicros {
			t.Errorf("sample %d's cost %d is ahead of the record's read after it, %d", i, m.CostMicros, after.CostMicros)
		}
		// (The meter runs every second: a sample a second after the read
		// sees at least what the read saw.)
		if m.Timestamp.After(readAt.Add(time.Second)) && m.CostMicros < before.CostMicros {
			t.Errorf("sample %d (%v) costs %d, behind the record read before it (%d)", i, m.Timestamp, m.CostMicros, before.CostMicros)
		}
	}
	if len(ms) < 2 || ms[len(ms)-1].CostMicros <= ms[0].CostMicros || ms[0].CostMicros < 0 {
		t.Errorf("the cost did not grow over %d samples: %+v", len(ms), ms)
	}
	if _, err := c.StopSandbox(t.Context(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if m := metrics(); len(m) != 0 {
		t.Errorf("an ended sandbox has %d samples, want none", len(m))
	}
}
