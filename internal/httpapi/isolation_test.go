package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// A sandbox's JSON always says its isolation: the spec's, or for a record
// from before specs had one, the backend it was recorded on.
func TestSandboxViewIsolation(t *testing.T) {
	tests := []struct {
		name string
		rec  sandbox.Record
		want string
	}{
		{"microvm", sandbox.Record{Backend: "microvm", Spec: sandbox.Spec{Isolation: "microvm"}}, "microvm"},
		{"gvisor", sandbox.Record{Backend: "gvisor", Spec: sandbox.Spec{Isolation: "gvisor"}}, "gvisor"},
		{"old record", sandbox.Record{Backend: "gvisor"}, "gvisor"},
	}
	for _, tt := range tests {
		v := SandboxView(&tt.rec)
		if v.Isolation != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, v.Isolation, tt.want)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if want := `"isolation":"` + tt.want + `"`; !strings.Contains(string(b), want) {
			t.Errorf("%s: JSON %s lacks %s", tt.name, b, want)
		}
	}
}
