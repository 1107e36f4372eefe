package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// spawnScript spawns a program N times inside the sandbox and prints each
// spawn-to-exit in microseconds: the gVisor floor under any exec the
// platform makes. posix_spawn, so Python's own subprocess machinery is not
// in the figure.
const spawnScript = `
import os, sys, time
n, argv = int(sys.argv[1]), sys.argv[2:]
null = os.open("/dev/null", os.O_WRONLY)
fa = [(os.POSIX_SPAWN_DUP2, null, 1)]
for i in range(n + 3):
    t = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa)
    _, st = os.waitpid(pid, 0)
    d = time.perf_counter_ns() - t
    if st != 0:
        sys.exit("%s exited %d" % (argv, st))
    if i >= 3:  # the first spawns fill caches
        print(d // 1000)
`

// spawnFloor times n spawns of argv inside sandbox id.
func spawnFloor(ctx context.Context, c *client.Client, id string, n int, argv ...string) (series, error) {
	req := api.ExecRequest{Cmd: api.Command{Argv: append([]string{"python3", "-c", spawnScript, strconv.Itoa(n)}, argv...)}}
	res, err := c.Exec(ctx, id, req, client.ExecOptions{})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("spawn script exited %d: %s", res.ExitCode, res.Stderr)
	}
	var s series
	for _, f := range strings.Fields(res.Stdout) {
		us, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("spawn script printed %q", f)
		}
		s = append(s, time.Duration(us)*time.Microsecond)
	}
	return s, nil
}
