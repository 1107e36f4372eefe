// Command sandbox-agent is the daemon inside every sandbox. It is the
// sandbox's first process: it connects out to the host's listener in
// /run/withruntime (a host directory it sees read-only, so the host reaches
// it without any network and without dialing anything the sandbox names),
// serves the host's requests on those connections, and reaps the orphans
// that end up under it.
//
// It is built static (CGO_ENABLED=0) and imports little: it ships into
// every sandbox.
package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/agent"
	"github.com/withruntime/withruntime/internal/agentlink"
)

const (
	sockDir = "/run/withruntime"
	// envKeysVar names the variables of the sandbox's environment.
	envKeysVar = "WITHRUNTIME_ENV_KEYS"
	// channelVar names a microVM's agent port (its guest init sets it):
	// the link then runs over that one stream instead of sockDir.
	channelVar = "WITHRUNTIME_CHANNEL"
)

func main() {
	os.Exit(serve())
}

func serve() int {
	cfg := agent.DefaultConfig()
	// The sandbox's own environment (its create request's env) arrives in
	// this process's environment, named by envKeysVar; the rest of it
	// (HOME=/root that runsc sets for a root process, say) is not the
	// user's.
	for _, k := range strings.Split(os.Getenv(envKeysVar), ",") {
		if v, ok := os.LookupEnv(k); ok && k != "" {
			cfg.BaseEnv[k] = v
		}
	}
	// A template's defaults: the directory commands and relative paths
	// start from (made if the image lacks it, as a Dockerfile's WORKDIR
	// is), and whom a command that names no user runs as.
	if dir := os.Getenv(agentlink.WorkdirVar); dir != "" {
		cfg.Workspace = dir
		if _, err := os.Stat(dir); err != nil {
			os.MkdirAll(dir, 0o755)
		}
	}
	cfg.DefaultUser = os.Getenv(agentlink.UserVar)
	if err := cfg.Validate(); err != nil {
		os.Stderr.WriteString("sandbox-agent: " + err.Error() + "\n")
		return 1
	}
	h := agent.New(cfg)
	if os.Getpid() == 1 {
		if err := detachConsole(); err != nil {
			os.Stderr.WriteString("sandbox-agent: " + err.Error() + "\n")
			return 1
		}
		h.ReapOrphans()
		// gVisor has no OOM killer: without this, a program that outgrows
		// the sandbox's memory ends the whole sandbox at the host's limit.
		// A microVM's own kernel has one.
		if os.Getenv(channelVar) == "" {
			go (&agent.OOMWatch{Self: os.Getpid()}).Run()
		} else {
			go (&agent.MemFSWatch{End: powerOff}).Run()
		}
	}
	link := &agentlink.Agent{Handler: h, Suspending: h.Suspending, Resumed: h.Resumed}
	if port := os.Getenv(channelVar); port != "" {
		f, err := os.OpenFile(port, os.O_RDWR, 0)
		if err != nil {
			os.Stderr.WriteString("sandbox-agent: " + err.Error() + "\n")
			return 1
		}
		p := agentlink.NewPort(f)
		go p.Run(context.Background())
		link.Dial, link.WaitResume = p.Dial, p.WaitResume
	} else {
		sock := filepath.Join(sockDir, agentlink.SockName)
		link.Dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		link.WaitResume = waitFile(filepath.Join(sockDir, agentlink.ResumeName))
	}
	if err := link.Run(context.Background()); err != nil {
		os.Stderr.WriteString("sandbox-agent: " + err.Error() + "\n")
		return 1
	}
	return 0
}

// detachConsole points this process's stdio at /dev/null. The sandbox's
// first process inherits a host file as stdio (runsc's console log), and
// root inside could write to it through /proc/1/fd without bound: from now
// on no process in the sandbox holds it.
func detachConsole() error {
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(null)
	for fd := range 3 {
		if err := unix.Dup3(null, fd, 0); err != nil {
			return err
		}
	}
	return nil
}

// powerOff ends a microVM for memory, saying so on its console first (at
// a level a quiet kernel still prints).
func powerOff(reason string) {
	if f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		f.WriteString("<2>" + agentlink.OOMMark + ": " + reason + "\n")
		f.Close()
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

// waitFile waits for the host to create path: the host's only way to
// reach a suspended agent, which holds no connection across a checkpoint.
func waitFile(path string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for {
			if _, err := os.Stat(path); err == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}
