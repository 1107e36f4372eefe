// Command sandbox-agent is the daemon inside every sandbox. It is the
// sandbox's first process: it serves on a Unix socket in /run/withruntime
// (a host directory, so the host reaches it without any network) and
// reaps the orphans that end up under it.
//
// It is built static (CGO_ENABLED=0) and imports little: it ships into
// every sandbox.
package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/agent"
)

const (
	sockDir    = "/run/withruntime"
	sockName   = "agent.sock"
	resumeFlag = "resume"
	// envKeysVar names the variables of the sandbox's environment.
	envKeysVar = "WITHRUNTIME_ENV_KEYS"
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
	if err := cfg.Validate(); err != nil {
		os.Stderr.WriteString("sandbox-agent: " + err.Error() + "\n")
		return 1
	}
	h := agent.New(cfg)
	if os.Getpid() == 1 {
		h.ReapOrphans()
	}
	sock := filepath.Join(sockDir, sockName)
	for {
		suspend := make(chan struct{})
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("POST /suspend", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			select {
			case <-suspend:
			default:
				close(suspend)
			}
		})
		os.Remove(sock)
		l, err := net.Listen("unix", sock)
		if err != nil {
			os.Stderr.WriteString("sandbox-agent: listening: " + err.Error() + "\n")
			return 1
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
		go srv.Serve(l)
		<-suspend
		// gVisor cannot save a socket bound on the host: close every
		// connection and the listener, then wait for the host to say the
		// sandbox was restored.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		srv.Shutdown(ctx)
		cancel()
		srv.Close()
		os.Remove(sock)
		for {
			if _, err := os.Stat(filepath.Join(sockDir, resumeFlag)); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
