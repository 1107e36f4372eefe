package node

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/withruntime/withruntime/internal/noderpc"
	"github.com/withruntime/withruntime/internal/sandbox"
)

func (f *fakeManager) EndRetention(_ context.Context, id string) (*sandbox.Record, error) {
	f.record("end_retention " + id)
	return f.rec(id, "acct")
}

// TestRPCStopReason: a stop with reason retention_ended is the manager's
// EndRetention; any other reason, or a reason on another operation, is
// refused before the manager is asked.
func TestRPCStopReason(t *testing.T) {
	r := newRig(t)
	c := r.apiClient(t)
	resp, b := postJSON(t, c, r.url+"/node/v1/sandboxes/sb1/stop", noderpc.OpRequest{Reason: sandbox.EndRetentionEnded})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stop retention_ended: got %d %s, want 200", resp.StatusCode, b)
	}
	for _, tt := range []struct {
		op     string
		reason sandbox.EndReason
	}{
		{noderpc.OpStop, sandbox.EndStopped},
		{noderpc.OpStop, sandbox.EndNodeLost},
		{noderpc.OpStop, "anything"},
		{noderpc.OpPause, sandbox.EndRetentionEnded},
		{noderpc.OpResume, sandbox.EndRetentionEnded},
	} {
		resp, b := postJSON(t, c, r.url+"/node/v1/sandboxes/sb1/"+tt.op, noderpc.OpRequest{Account: "acct", Reason: tt.reason})
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s with reason %q: got %d %s, want 400 invalid", tt.op, tt.reason, resp.StatusCode, b)
		}
	}
	if calls := r.mgr.Calls(); !slices.Equal(calls, []string{"end_retention sb1"}) {
		t.Errorf("manager calls: got %q, want only the end of retention", calls)
	}
}
