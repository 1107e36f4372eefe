package hostcgroup

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeCgroupFile writes value into an existing cgroup file: never made
// here, so that a sandbox that is gone gets no cgroup back.
func writeCgroupFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// sumStat adds the values of keys in a cgroup's memory.stat ("key value"
// lines); a key missing from the file is an error.
func sumStat(path string, keys ...string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var sum uint64
	found := 0
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !slices.Contains(keys, k) {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		sum += n
		found++
	}
	if found != len(keys) {
		return 0, fmt.Errorf("%s: not every one of %v", path, keys)
	}
	return sum, nil
}

// readProcs parses a cgroup.procs file: one pid per line.
func readProcs(path string) ([]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// untilRemoved retries del for as long as settle while killed processes
// are still leaving the cgroup: the kernel refuses to remove a cgroup with
// a process in it.
func untilRemoved(settle time.Duration, del func() error) error {
	deadline := time.Now().Add(settle)
	for {
		err := del()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
