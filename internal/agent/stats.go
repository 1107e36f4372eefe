package agent

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/withruntime/withruntime/api"
)

// GET /stats: the sandbox's resource use as its own kernel reports it
// (/proc/stat, /proc/meminfo, the root file system, /proc/net/dev). The
// host samples it every 5 seconds (sandbox.MetricsInterval).

// statsFileMax bounds what is read of one proc file.
const statsFileMax = 1 << 20

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, readStats("/"))
	return nil
}

// readStats reads what it can; a figure it cannot read stays 0.
func readStats(root string) api.AgentStats {
	st := api.AgentStats{CPUCount: runtime.NumCPU()}
	if b := readProc("/proc/stat"); b != nil {
		st.CPUSeconds = cpuSeconds(b)
	}
	if b := readProc("/proc/meminfo"); b != nil {
		st.MemTotal, st.MemUsed = memory(b)
	}
	var fs syscall.Statfs_t
	if syscall.Statfs(root, &fs) == nil {
		st.DiskTotal = int64(fs.Blocks) * fs.Bsize
		st.DiskUsed = int64(fs.Blocks-fs.Bfree) * fs.Bsize
	}
	if b := readProc("/proc/net/dev"); b != nil {
		st.NetRx, st.NetTx = netBytes(b)
	}
	return st
}

func readProc(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, statsFileMax)); err != nil {
		return nil
	}
	return buf.Bytes()
}

// userHz is the unit of /proc/stat's times (USER_HZ, 100 on Linux and
// in gVisor).
const userHz = 100

// cpuSeconds is the busy time of every CPU in /proc/stat's "cpu" line:
// all of it but idle and iowait.
func cpuSeconds(b []byte) float64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var busy uint64
		for i, v := range f[1:] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0
			}
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			busy += n
		}
		return float64(busy) / userHz
	}
	return 0
}

// memory is MemTotal and MemTotal less MemAvailable, in bytes.
func memory(b []byte) (total, used int64) {
	var avail int64 = -1
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = kb << 10
		case "MemAvailable:":
			avail = kb << 10
		}
	}
	if avail < 0 || avail > total {
		return total, 0
	}
	return total, total - avail
}

// netBytes sums the received and sent bytes of every interface but
// loopback.
func netBytes(b []byte) (rx, tx int64) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) == "lo" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			continue
		}
		r, err1 := strconv.ParseInt(f[0], 10, 64)
		t, err2 := strconv.ParseInt(f[8], 10, 64)
		if err1 == nil && err2 == nil {
			rx += r
			tx += t
		}
	}
	return rx, tx
}
