// Command sandbox-agent is the daemon inside every sandbox. As the
// sandbox's first process it reaps orphans and runs itself again as the
// server, which listens on a Unix socket in /run/withruntime: a host
// directory, so the host reaches it without any network.
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
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serve())
	}
	if os.Getpid() == 1 {
		err := agent.RunInit([]string{os.Args[0], "serve"})
		os.Stderr.WriteString("sandbox-agent: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(serve())
}

func serve() int {
	cfg := agent.DefaultConfig()
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			cfg.BaseEnv[k] = v
		}
	}
	h := agent.New(cfg)
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
