package agent

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/withruntime/withruntime/api"
)

func TestStatsParsers(t *testing.T) {
	if got := cpuSeconds([]byte("cpu  100 20 30 4000 50 6 7 0 0 0\ncpu0 1 2 3 4 5 6 7 0 0 0\n")); got != 1.63 {
		t.Errorf("cpuSeconds: %v, want 1.63 (163 ticks busy: idle and iowait left out)", got)
	}
	total, used := memory([]byte("MemTotal:        2048 kB\nMemFree:          100 kB\nMemAvailable:     512 kB\n"))
	if total != 2048<<10 || used != 1536<<10 {
		t.Errorf("memory: %d %d", total, used)
	}
	if total, used := memory([]byte("MemTotal: 10 kB\nMemAvailable: 99 kB\n")); used != 0 || total != 10<<10 {
		t.Errorf("memory with more available than total: %d %d, want used 0", total, used)
	}
	dev := "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets\n" +
		"    lo: 999 1 0 0 0 0 0 0 999 1 0 0 0 0 0 0\n  eth0: 1000 5 0 0 0 0 0 0 300 2 0 0 0 0 0 0\n  eth1: 24 1 0 0 0 0 0 0 6 1 0 0 0 0 0 0\n"
	if rx, tx := netBytes([]byte(dev)); rx != 1024 || tx != 306 {
		t.Errorf("netBytes: %d %d, want 1024 306 (loopback left out)", rx, tx)
	}
	for _, bad := range []string{"", "cpu x y z w v", "garbage"} {
		if got := cpuSeconds([]byte(bad)); got != 0 {
			t.Errorf("cpuSeconds(%q) = %v", bad, got)
		}
	}
}

// TestStatsRoute: the route answers the machine's own figures.
func TestStatsRoute(t *testing.T) {
	a := newTestAgent(t)
	var st api.AgentStats
	a.doJSON(http.MethodGet, "/stats", nil, http.StatusOK, &st)
	if st.CPUCount < 1 || st.MemTotal <= 0 || st.MemUsed <= 0 || st.DiskTotal <= 0 || st.CPUSeconds <= 0 {
		b, _ := json.Marshal(st)
		t.Errorf("stats %s: want every figure of a live machine", b)
	}
}
