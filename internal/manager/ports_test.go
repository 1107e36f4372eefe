package manager

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestUpgradePort: after the agent's 101, the port's first bytes are the
// caller's to read (none lost in a buffer); an error answer keeps its
// code, and an answer that is neither is a bad gateway.
func TestUpgradePort(t *testing.T) {
	for _, tc := range []struct {
		answer string
		kind   sandbox.Kind
	}{
		{"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: withruntime-tcp\r\n\r\nGREETING", ""},
		{"HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nContent-Length: 61\r\n\r\n{\"error\":{\"code\":\"bad_gateway\",\"message\":\"nothing on 8000\"}}", sandbox.KindBadGateway},
		{"HTTP/1.1 500 Oops\r\nContent-Length: 58\r\n\r\n{\"error\":{\"code\":\"forbidden\",\"message\":\"made up by root\"}}", sandbox.KindBadGateway},
		{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: something-else\r\n\r\n", sandbox.KindBadGateway},
		{"garbage", sandbox.KindConflict},
	} {
		host, agent := net.Pipe()
		go func() {
			buf := make([]byte, 4096)
			agent.Read(buf) // the request
			io.WriteString(agent, tc.answer)
			agent.Close()
		}()
		err := upgradePort(context.Background(), host, 8000)
		if got := sandbox.KindOf(err); got != tc.kind && !(tc.kind == "" && err == nil) {
			t.Errorf("answer %q: got %v, want kind %q", tc.answer[:20], err, tc.kind)
		}
		if tc.kind == "" && err == nil {
			if b, _ := io.ReadAll(host); string(b) != "GREETING" {
				t.Errorf("after the 101: %q, want GREETING", b)
			}
		}
		host.Close()
	}
}
