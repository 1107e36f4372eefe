package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/defaults"
)

// The client's help names the server's defaults, which the client does
// not import (it is a thin layer over the API): this test holds each hint
// to the one place the server's default is written, so that a change
// there fails here instead of leaving the help wrong.
func TestHelpNamesTheServerDefaults(t *testing.T) {
	create := []string{
		fmt.Sprintf("N virtual CPUs (server default %d)", defaults.VCPUs),
		fmt.Sprintf("memory in MiB (server default %d)", defaults.MemoryMiB),
		fmt.Sprintf("writable layer in GIB (server default %d)", defaults.DiskGiB),
		fmt.Sprintf("such as 15m (server default %ds)", int(defaults.Lease.Seconds())),
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"sandbox", "create", "--help"}, create},
		{[]string{"sandbox", "run", "--help"}, create[:3]},
		{[]string{"accounts", "create", "--help"}, []string{fmt.Sprintf("(server default %d)", defaults.Concurrency)}},
	} {
		code, stdout, stderr := run(t, nil, c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: help lacks %q", c.args, w)
			}
		}
	}
}
