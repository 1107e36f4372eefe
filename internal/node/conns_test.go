package node

import (
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/noderpc"
)

// More than a thousand silent connections from one source (strangers need
// no certificate to connect) do not keep an API server from another source
// out, and all but MaxPendingPerSource of them are closed at once.
func TestRPCSilentConnectionsDoNotLockOut(t *testing.T) {
	r := newRig(t)
	addr := strings.TrimPrefix(r.url, "https://")
	const silent = 1100
	conns := make([]net.Conn, 0, silent)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range silent {
		c, err := net.Dial("tcp", addr) // from 127.0.0.1
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}

	// The API server, from 127.0.0.2, is answered while every silent
	// connection may still be waiting for its handshake (ReadHeaderTimeout
	// bounds it): the bound below is half that.
	cfg, err := r.auth.ClientTLS(testNode)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{
		TLSClientConfig:   cfg,
		ForceAttemptHTTP2: true,
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}
	defer tr.CloseIdleConnections()
	api := &http.Client{Transport: tr, Timeout: ReadHeaderTimeout / 2}
	resp, err := api.Get(r.url + noderpc.PathHealth)
	if err != nil {
		t.Fatalf("the API server was kept out by %d silent connections: %v", silent, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got health status %d, want 200", resp.StatusCode)
	}

	// The server closed the connections past its bound for the source.
	var mu sync.Mutex
	closed := 0
	var wg sync.WaitGroup
	deadline := time.Now().Add(ReadHeaderTimeout / 2)
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(deadline)
			_, err := c.Read(make([]byte, 1))
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				mu.Lock()
				closed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if want := silent - MaxPendingPerSource; closed != want {
		t.Fatalf("got %d silent connections closed by the server, want %d (all but %d)", closed, want, MaxPendingPerSource)
	}
}

// A connection past its handshake no longer counts against its source:
// one source may hold more than MaxPendingPerSource served connections.
func TestRPCHandshakenConnectionsLeaveTheBound(t *testing.T) {
	r := newRig(t)
	cfg, err := r.auth.ClientTLS(testNode)
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxPendingPerSource + 10 {
		// A transport each: a connection each, all kept open.
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		t.Cleanup(tr.CloseIdleConnections)
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(r.url + noderpc.PathHealth)
		if err != nil {
			t.Fatalf("connection %d of one source: %v", i+1, err)
		}
		resp.Body.Close()
	}
}
