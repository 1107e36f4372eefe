package volume

import (
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestCheckMounts: the path rules of a create's volumes.
func TestCheckMounts(t *testing.T) {
	good := [][]Mount{
		{{Name: "data", Path: "/data"}},
		{{Name: "a", Path: "/mnt/a"}, {Name: "b", Path: "/mnt/b", ReadOnly: true}},
		{{Name: "x", Path: "/procfs"}, {Name: "y", Path: "/home/user/devices"}},
	}
	for _, ms := range good {
		if err := CheckMounts(ms); err != nil {
			t.Errorf("%+v: %v", ms, err)
		}
	}
	bad := [][]Mount{
		{{Name: "data", Path: "/"}},
		{{Name: "data", Path: "/proc"}},
		{{Name: "data", Path: "/proc/x"}},
		{{Name: "data", Path: "/sys"}},
		{{Name: "data", Path: "/dev/shm"}},
		{{Name: "data", Path: "/run"}},
		{{Name: "data", Path: "/opt/withruntime"}},
		{{Name: "data", Path: "/opt/withruntime/bin"}},
		{{Name: "data", Path: "data"}},
		{{Name: "data", Path: "/data/"}},
		{{Name: "data", Path: "/a/../data"}},
		{{Name: "data", Path: ""}},
		{{Name: "data", Path: "/da\x00ta"}},
		{{Name: "Data", Path: "/data"}},
		{{Name: "-x", Path: "/data"}},
		{{Name: "a", Path: "/data"}, {Name: "b", Path: "/data"}},
		{{Name: "a", Path: "/data"}, {Name: "b", Path: "/data/sub"}},
		{{Name: "a", Path: "/x"}, {Name: "a", Path: "/y"}},
	}
	for _, ms := range bad {
		if err := CheckMounts(ms); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("%+v: %v, want invalid_request", ms, err)
		}
	}
}

// TestValidName: the contract's name pattern.
func TestValidName(t *testing.T) {
	for _, n := range []string{"data", "a", "0.cache_x-y", "a123456789012345678901234567890123456789012345678901234567890ab"} {
		if !ValidName(n) {
			t.Errorf("%q refused", n)
		}
	}
	for _, n := range []string{"", "A", ".a", "_a", "a/b", "a b", "a123456789012345678901234567890123456789012345678901234567890abc", "é"} {
		if ValidName(n) {
			t.Errorf("%q accepted", n)
		}
	}
}
