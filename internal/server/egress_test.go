package server

import (
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/egress"
)

type noSandboxes struct{}

func (noSandboxes) SandboxByAddr(netip.Addr) (egress.Sandbox, bool) { return egress.Sandbox{}, false }

// logBuffer is a log destination for several goroutines.
type logBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// loopbackEgress is egress services on loopback, serving, supervised by
// a server that has nothing else.
func loopbackEgress(t *testing.T, log *slog.Logger) (*egressServices, *Server) {
	t.Helper()
	e := &egressServices{log: egress.NewLog(), failed: make(chan error, 2), stopped: make(chan struct{})}
	var err error
	if e.tcp, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if e.dnsTCP, err = net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if e.dnsUDP, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := e.serve(Config{Logger: log}, noSandboxes{}, nil); err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Logger: log}, egress: e, done: make(chan error, 1)}
	s.superviseEgress()
	t.Cleanup(e.close)
	return e, s
}

func TestEgressFailureEndsTheServer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kill    func(e *egressServices)
		service string
	}{
		{"the proxy's listener", func(e *egressServices) { e.tcp.Close() }, "egress proxy"},
		{"the resolver's UDP socket", func(e *egressServices) { e.dnsUDP.Close() }, "egress resolver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged logBuffer
			e, s := loopbackEgress(t, slog.New(slog.NewTextHandler(&logged, nil)))
			tc.kill(e) // from under the service, not by the server's close
			select {
			case err := <-s.done:
				if err == nil || !strings.Contains(err.Error(), tc.service) {
					t.Errorf("Wait's error: got %v, want one naming the %s", err, tc.service)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the server goes on after its %s stopped", tc.service)
			}
			if !strings.Contains(logged.String(), "level=ERROR") || !strings.Contains(logged.String(), tc.service) {
				t.Errorf("the failure was not logged as an error: %s", logged.String())
			}
		})
	}
	t.Run("closing is no failure", func(t *testing.T) {
		e, s := loopbackEgress(t, slog.New(slog.NewTextHandler(&logBuffer{}, nil)))
		e.close()
		time.Sleep(200 * time.Millisecond) // the services return now
		select {
		case err := <-s.done:
			t.Errorf("after close: got %v, want nothing", err)
		default:
		}
	})
}
