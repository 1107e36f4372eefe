package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/internal/manager"
	"github.com/withruntime/withruntime/internal/server"
)

// poolFlags registers --pool and --pool-max-age, which fill to's Pools
// and PoolMaxAge. Until a --pool is given to holds server.DefaultPools;
// the first one replaces them, and "none" leaves no pool. Every mistake
// is an error of the flag, so a usage error (exit 2) naming the value.
func poolFlags(fs *pflag.FlagSet, to *manager.Config) {
	to.Pools = server.DefaultPools()
	var given, none bool
	fs.Func("pool", fmt.Sprintf("a warm pool `SIZE=N`: N started sandboxes of SIZE (VCPUSxMEMORY_MIB) kept ready for the creates of that size, e.g. 2x4096=8 (repeatable; given pools replace the default %s; none: no pool)", poolList(server.DefaultPools())), func(v string) error {
		if !given {
			to.Pools, given = nil, true
		}
		if v == "none" {
			if len(to.Pools) > 0 {
				return errors.New("none cannot be combined with pool sizes")
			}
			none = true
			return nil
		}
		if none {
			return fmt.Errorf("%s cannot be combined with none", v)
		}
		p, err := manager.ParsePool(v)
		if err != nil {
			return err
		}
		for _, q := range to.Pools {
			if q.VCPUs == p.VCPUs && q.MemoryMiB == p.MemoryMiB {
				return fmt.Errorf("pool %q: size %dx%d has a pool already (%s)", v, p.VCPUs, p.MemoryMiB, q)
			}
		}
		to.Pools = append(to.Pools, p)
		return nil
	})
	to.PoolMaxAge = 30 * time.Minute
	fs.Var((*positiveDuration)(&to.PoolMaxAge), "pool-max-age", "replace a warm sandbox that has waited this long unclaimed")
}

func poolList(ps []manager.Pool) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += " "
		}
		s += p.String()
	}
	return s
}

// positiveDuration is a duration flag that refuses 0 and negatives: a zero
// max age would mean the manager's default, not "never" or "at once".
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }
func (d *positiveDuration) Type() string   { return "duration" }

func (d *positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration, like 30m", s)
	}
	if v <= 0 {
		return fmt.Errorf("%q: must be positive", s)
	}
	*d = positiveDuration(v)
	return nil
}
