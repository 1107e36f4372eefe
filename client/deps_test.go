package client

import (
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestImports fences the package: the public client depends on the standard library, the wire contract, the tar extractor (itself standard library only) and coder/websocket (itself standard library only; DialPort's WebSocket) alone.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd("api", "internal/tarx", "github.com/coder/websocket"))
}
