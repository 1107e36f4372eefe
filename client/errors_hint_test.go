package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

// TestRefusedSaysHowToStartAServer: an SDK that reaches no server says how
// to start one.
func TestRefusedSaysHowToStartAServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c, err := New(WithBaseURL("http://"+addr), WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListSandboxes(context.Background())
	var te *TransportError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "withruntime serve") || !strings.Contains(err.Error(), "withruntime sandbox ls") {
		t.Fatalf("got %v, want a TransportError saying how to start a server", err)
	}
}
