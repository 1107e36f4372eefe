package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// freshScript reports any marker an earlier user of the sandbox left and
// the kernel's boot id, then leaves its own markers for the next one: what
// public benchmarks do to fail reused sandboxes.
const freshScript = `
for f in /tmp/bench-marker /workspace/bench-marker; do
  [ -e "$f" ] && echo "seen $f $(cat "$f")"
done
echo "boot $(cat /proc/sys/kernel/random/boot_id)"
echo "$1" > /tmp/bench-marker && echo "$1" > /workspace/bench-marker && echo written
`

// freshness checks every sandbox handed out in the run: no earlier marker
// visible, no boot id seen twice.
type freshness struct {
	mu      sync.Mutex
	boots   map[string]string // boot id -> sandbox
	checked int
	fails   []string
	out     io.Writer // where FAIL lines go the moment they are seen
}

func newFreshness() *freshness { return &freshness{boots: map[string]string{}, out: os.Stdout} }

// check runs the probe in sandbox id; a failure is printed at once and
// kept for the exit status.
func (f *freshness) check(ctx context.Context, c *client.Client, id string) {
	req := api.ExecRequest{Cmd: api.Command{Argv: []string{"sh", "-c", freshScript, "sh", id}}}
	res, err := c.Exec(ctx, id, req, client.ExecOptions{})
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked++
	fail := func(format string, a ...any) {
		msg := fmt.Sprintf("FAIL freshness: sandbox %s: ", id) + fmt.Sprintf(format, a...)
		fmt.Fprintln(f.out, msg)
		f.fails = append(f.fails, msg)
	}
	if err != nil {
		fail("probe: %v", err)
		return
	}
	var boot string
	written := false
	for _, l := range strings.Split(res.Stdout, "\n") {
		switch {
		case strings.HasPrefix(l, "seen "):
			fail("an earlier marker is visible: %s", strings.TrimPrefix(l, "seen "))
		case strings.HasPrefix(l, "boot "):
			boot = strings.TrimSpace(strings.TrimPrefix(l, "boot "))
		case l == "written":
			written = true
		}
	}
	if !written {
		fail("markers not written: %q %q", res.Stdout, res.Stderr)
	}
	if boot == "" {
		fail("no boot id: %q", res.Stdout)
		return
	}
	if prev, ok := f.boots[boot]; ok {
		fail("boot id %s seen before in sandbox %s", boot, prev)
		return
	}
	f.boots[boot] = id
}

// verdict prints how many sandboxes were checked and fails the run if
// any was not fresh.
func (f *freshness) verdict() error {
	fmt.Printf("freshness: %d sandboxes checked, %d boot ids, %d failures\n", f.checked, len(f.boots), len(f.fails))
	if len(f.fails) > 0 {
		return fmt.Errorf("freshness: %d failures: %s", len(f.fails), strings.Join(f.fails, "; "))
	}
	return nil
}
