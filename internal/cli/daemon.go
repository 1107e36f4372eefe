package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/withruntime/withruntime/client"
)

// The local daemon is "withruntime serve" started in the background by the
// first command that finds nothing on the default address (with
// WITHRUNTIME_BASE_URL unset). Its state is the data dir
// $XDG_DATA_HOME/withruntime: the database, admin.key, daemon.log (its
// output) and daemon.pid, which the daemon holds an flock on while it runs
// (so a stale file or a reused pid never passes for a daemon). It exits by
// itself once idle (serve --idle-exit) with no sandbox alive.

const (
	// envDaemonIdleExit replaces the daemon's idle period (tests only).
	envDaemonIdleExit = "WITHRUNTIME_DAEMON_IDLE_EXIT"
	// EnvDaemonE2BListen, when set, makes the daemon also serve E2B's API
	// there (serve --e2b-listen).
	EnvDaemonE2BListen = "WITHRUNTIME_DAEMON_E2B_LISTEN"
	daemonIdleExit     = 10 * time.Minute
	// daemonStartWait bounds the wait for a daemon just started to answer
	// (it recovers the sandboxes an earlier one left first).
	daemonStartWait = 20 * time.Second
	// probeTimeout bounds one check for a server on the default address.
	probeTimeout = 300 * time.Millisecond
)

// daemon is where the local daemon lives.
type daemon struct {
	url, addr string // http://127.0.0.1:7878 and 127.0.0.1:7878
	dir       string // its data dir
	log, pid  string // files in dir
	lock      string // serializes starting it
}

func (a *App) localDaemon() (daemon, error) {
	def := a.defaultBaseURL
	if def == "" {
		def = client.DefaultBaseURL
	}
	u, err := url.Parse(def)
	if err != nil {
		return daemon{}, err
	}
	dir, err := client.LocalDataDir()
	if err != nil {
		return daemon{}, fmt.Errorf("finding the local daemon's data dir: %v (set XDG_DATA_HOME)", err)
	}
	return daemon{
		url: def, addr: u.Host, dir: dir,
		log:  filepath.Join(dir, "daemon.log"),
		pid:  filepath.Join(dir, "daemon.pid"),
		lock: filepath.Join(dir, "daemon.lock"),
	}, nil
}

// answers says whether something answers GET /v1/health on the daemon's
// address (an error answer counts: something is there).
func (d daemon) answers(ctx context.Context, c *client.Client) bool {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := c.Health(pctx)
	var ae *client.APIError
	return err == nil || errors.As(err, &ae)
}

// adminKey returns the daemon's admin key ("" when it cannot be read) and
// the user whose daemon it is: the key file's owner, or this user when
// there is no key yet (the daemon this command starts runs as this user).
func (d daemon) adminKey() (key string, owner int) {
	key, owner, err := client.ReadLocalKey()
	if err != nil {
		return "", os.Geteuid()
	}
	return key, owner
}

// checkHolder refuses the daemon's address when another user than owner
// listens there (no daemon runs, and a local user took the port): the
// error names the listener's process and user, and nothing is sent to it.
// checkable is false where the kernel cannot be asked (not Linux).
func (d daemon) checkHolder(owner int) (checkable bool, err error) {
	_, err = client.CheckLocalListener(d.addr, owner)
	if errors.Is(err, errors.ErrUnsupported) {
		return false, nil
	}
	return true, err
}

// running returns the pid of the daemon when one runs on d.dir: a process
// holds daemon.pid's lock.
func (d daemon) running() (int, bool) {
	f, err := os.Open(d.pid)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if !lockHeld(f) {
		return 0, false
	}
	b, err := os.ReadFile(d.pid)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// startDaemon starts the local daemon unless another command just did,
// and waits until it answers. Commands racing here take daemon.lock in
// turn; each probes again once it holds it, so one daemon starts.
func (a *App) startDaemon(ctx context.Context, d daemon, c *client.Client) error {
	unavailable := func(format string, args ...any) error {
		return &cliError{codeUnavailable, fmt.Sprintf(format, args...)}
	}
	if a.Hooks.Daemon == nil {
		if a.Hooks.NoDaemon != "" {
			return unavailable("nothing answers on %s, and %s", d.url, a.Hooks.NoDaemon)
		}
		return unavailable("nothing answers on %s and this build cannot start the local daemon; run \"withruntime serve\" or set %s",
			d.url, client.EnvBaseURL)
	}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return unavailable("starting the local daemon: %v", err)
	}
	lf, err := os.OpenFile(d.lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return unavailable("starting the local daemon: %v", err)
	}
	defer lf.Close() // and with it the lock
	if err := lockExclusive(lf); err != nil {
		return unavailable("starting the local daemon: locking %s: %v", d.lock, err)
	}
	if d.answers(ctx, c) {
		return nil // another command started it meanwhile
	}
	var exited chan error
	if _, ok := d.running(); !ok {
		if exited, err = a.spawnDaemon(d); err != nil {
			return unavailable("starting the local daemon: %v", err)
		}
		fmt.Fprintf(a.errOut(), "withruntime: started the local daemon on %s (log: %s; \"withruntime daemon stop\" stops it)\n", d.addr, d.log)
	} // else one is starting up: wait for it as well
	deadline := time.Now().Add(daemonStartWait)
	for !d.answers(ctx, c) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case err := <-exited:
			return unavailable("the local daemon exited (%v) before answering on %s; its log %s ends with: %s",
				err, d.addr, d.log, logTail(d.log))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return unavailable("the local daemon does not answer on %s after %v; see its log %s", d.addr, daemonStartWait, d.log)
		}
	}
	return nil
}

// spawnDaemon runs "withruntime serve" detached: in its own session (no
// terminal, not in the command's process group, so Ctrl-C on the command
// leaves it be), its output appended to daemon.log. The channel gets its
// end if it exits while this command waits.
func (a *App) spawnDaemon(d daemon) (chan error, error) {
	exe, err := a.Hooks.Daemon()
	if err != nil {
		return nil, err
	}
	idle := daemonIdleExit.String()
	if v := os.Getenv(envDaemonIdleExit); v != "" {
		idle = v
	}
	logf, err := os.OpenFile(d.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the daemon has its own copy
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	cmd := exec.Command(exe, "serve", "--listen", d.addr, "--data-dir", d.dir,
		"--idle-exit", idle, "--pid-file", d.pid,
		// http://<port>-<id>.localhost:<daemon's port>/ opens a sandbox's
		// port with no DNS set up.
		"--preview-domain", "localhost")
	if e2b := os.Getenv(EnvDaemonE2BListen); e2b != "" {
		cmd.Args = append(cmd.Args, "--e2b-listen", e2b)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.Dir = "/"
	detach(cmd)
	fmt.Fprintf(logf, "%s withruntime: starting the local daemon: %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(cmd.Args, " "))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}

// logTail returns the last lines of a log, on one line.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// errOut is the command's stderr.
func (a *App) errOut() io.Writer {
	if a.stderr == nil {
		return os.Stderr
	}
	return a.stderr
}

// unauthorizedHint adds to an unauthorized answer where keys come from.
//
// The local daemon's admin key file is named only when the key can have
// come from it: neither WITHRUNTIME_BASE_URL (another server) nor
// WITHRUNTIME_API_KEY (the user's own key) is set.
func unauthorizedHint(msg string) string {
	if os.Getenv(client.EnvBaseURL) != "" || os.Getenv(client.EnvAPIKey) != "" {
		if msg == "" {
			msg = "unauthorized"
		}
		return fmt.Sprintf("%s (set %s to a key of this server)", msg, client.EnvAPIKey)
	}
	where := "$XDG_DATA_HOME/withruntime/admin.key"
	if p, err := client.LocalKeyPath(); err == nil {
		where = p
	}
	if msg == "" {
		msg = "unauthorized"
	}
	return fmt.Sprintf("%s (set %s to a key of this server; the local daemon's admin key is in %s)", msg, client.EnvAPIKey, where)
}
