package cli

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// "withruntime mcp" speaks MCP on its stdin and stdout, its tools acting
// on the server WITHRUNTIME_BASE_URL names, and ends when stdin closes.
func TestMCPOverStdio(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	exited := make(chan int, 1)
	go func() {
		code := (&App{}).Main([]string{"mcp"}, inR, outW, &stderr)
		outW.Close()
		exited <- code
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sandbox_list", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(b), `"id":"sbx_a"`) {
		t.Errorf("sandbox_list: got %v %s, want the fake server's sbx_a", res.IsError, b)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "sandbox_stop", Arguments: map[string]any{"sandbox_id": "sbx_nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !res.IsError || !ok || !strings.HasPrefix(tc.Text, "not_found: ") {
		t.Errorf("sandbox_stop of an unknown id: got %v %+v, want a not_found tool error", res.IsError, res.Content[0])
	}
	cs.Close()
	if code := <-exited; code != exitOK || stderr.String() != "" {
		t.Errorf("after stdin closed: got exit %d stderr %q, want 0 and nothing", code, stderr.String())
	}
}
