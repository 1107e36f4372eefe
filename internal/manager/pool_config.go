package manager

import (
	"fmt"
	"strconv"
	"strings"
)

// Pool is one warm pool: Size sandboxes of VCPUs x MemoryMiB kept booted,
// of the default image, disk and process limit.
type Pool struct {
	VCPUs, MemoryMiB, Size int
}

func (p Pool) String() string { return fmt.Sprintf("%dx%d=%d", p.VCPUs, p.MemoryMiB, p.Size) }

// ParsePool reads "VCPUSxMEMORY_MIB=N", as --pool takes it.
func ParsePool(s string) (Pool, error) {
	size, n, ok := strings.Cut(s, "=")
	v, mem, ok2 := strings.Cut(size, "x")
	if !ok || !ok2 {
		return Pool{}, fmt.Errorf("pool %q: want VCPUSxMEMORY_MIB=N, like 2x4096=8", s)
	}
	var p Pool
	for _, f := range []struct {
		text string
		to   *int
		min  int
	}{{v, &p.VCPUs, 1}, {mem, &p.MemoryMiB, 1}, {n, &p.Size, 0}} {
		x, err := strconv.Atoi(f.text)
		if err != nil || x < f.min || x > 1<<20 {
			return Pool{}, fmt.Errorf("pool %q: %q is not a whole number in range", s, f.text)
		}
		*f.to = x
	}
	return p, nil
}
