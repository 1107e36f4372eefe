package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// memberMemory sums, per sandbox of the server whose data dir is dataDir,
// the proportional set size (PSS, from smaps_rollup; RSS where that file
// is missing) of its host processes, in MiB. Run with the pool warm and
// nothing in use, every sandbox it finds is an idle pool member. A
// sandbox's processes are those of its memory cgroup plus any whose
// command line names its state dir (the gofer may sit outside the
// cgroup); other servers' sandboxes on the host are left out by the data
// dir.
func memberMemory(dataDir string) []float64 {
	pids := map[string]map[int]bool{} // sandbox id -> pids
	add := func(id string, pid int) {
		if pids[id] == nil {
			pids[id] = map[int]bool{}
		}
		pids[id][pid] = true
	}
	state := filepath.Join(dataDir, "sandboxes") + "/"
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := bytes.Index(cmd, []byte(state))
		if i < 0 {
			continue
		}
		id, _, _ := strings.Cut(string(cmd[i+len(state):]), "/")
		id, _, _ = strings.Cut(id, "\x00")
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		add(id, pid)
	}
	for id := range pids {
		for _, dir := range []string{"/sys/fs/cgroup/memory/withruntime", "/sys/fs/cgroup/withruntime"} {
			data, err := os.ReadFile(filepath.Join(dir, id, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					add(id, pid)
				}
			}
		}
	}
	var out []float64
	for _, set := range pids {
		var kb float64
		for pid := range set {
			kb += pssKB(pid)
		}
		out = append(out, kb/1024)
	}
	sort.Float64s(out)
	return out
}

// pssKB reads a process's Pss from smaps_rollup, or its VmRSS.
func pssKB(pid int) float64 {
	for _, f := range []struct{ file, key string }{{"smaps_rollup", "Pss:"}, {"status", "VmRSS:"}} {
		fh, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), f.file))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == f.key {
				v, _ := strconv.ParseFloat(fields[1], 64)
				fh.Close()
				return v
			}
		}
		fh.Close()
	}
	return 0
}
