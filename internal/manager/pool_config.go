package manager

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/withruntime/withruntime/internal/template"
)

// Pool is one warm pool: Size sandboxes of VCPUs x MemoryMiB kept booted,
// of the default disk and process limit, and of the default image or of
// Template.
type Pool struct {
	// Template is "name:tag" of the template the members start from, as
	// the admin account resolves it (its own, or a public one); "": the
	// default image.
	Template               string
	VCPUs, MemoryMiB, Size int
}

func (p Pool) String() string {
	s := fmt.Sprintf("%dx%d=%d", p.VCPUs, p.MemoryMiB, p.Size)
	if p.Template != "" {
		s = p.Template + ":" + s
	}
	return s
}

// ParsePool reads "[TEMPLATE:]VCPUSxMEMORY_MIB=N", as --pool takes it: the
// size is what follows the last ":", a template name[:tag] what comes
// before it.
func ParsePool(s string) (Pool, error) {
	if i := strings.LastIndex(s, ":"); i >= 0 {
		ref, err := template.ParseRef(s[:i])
		if err != nil {
			return Pool{}, fmt.Errorf("pool %q: %v", s, err)
		}
		pool, err := ParsePool(s[i+1:])
		if err != nil {
			return Pool{}, fmt.Errorf("pool %q: want TEMPLATE:VCPUSxMEMORY_MIB=N, like myteam/app:2x4096=4", s)
		}
		pool.Template = ref.String()
		return pool, nil
	}
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
