package hostcgroup

import (
	"errors"
	"os"
	"strconv"
	"strings"
)

// WarmShares is the lowest CPU priority, the OCI spec's lowest cpu.shares,
// that a pool member waits at (Resources.Shares): booting and idling spare
// sandboxes never takes CPU from live ones. The v2 library turns it into
// cpu.weight 1.
const WarmShares = 2

// CPUPriority reads the sandbox's CPU priority as the kernel keeps it
// (cpu.shares on v1, cpu.weight on v2), with what it reads at the lowest
// priority and at the kernel's default, for comparison.
func CPUPriority(l Layout, id string) (got, warm, normal string, err error) {
	var path string
	switch c := l.(type) {
	case V1:
		path, err = c.File(id, "cpu", "cpu.shares")
		warm, normal = strconv.Itoa(WarmShares), strconv.Itoa(v1DefaultShares)
	case V2:
		path, err = c.File(id, "cpu", "cpu.weight")
		warm, normal = "1", strconv.Itoa(v2DefaultWeight)
	default:
		return "", "", "", errors.New("no cgroups on this host")
	}
	if err != nil {
		return "", "", "", err
	}
	data, err := os.ReadFile(path)
	return strings.TrimSpace(string(data)), warm, normal, err
}
