package cluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/cluster"
	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store/storetest"
)

// TestNodeAnswersChecked: a record a node answers with that is not the
// sandbox asked about, not on that node, or of another account is not
// passed on to the caller.
func TestNodeAnswersChecked(t *testing.T) {
	lies := []struct {
		name string
		lie  func(*sandbox.Record)
	}{
		{"another sandbox", func(r *sandbox.Record) { r.ID = "sb-someone-else" }},
		{"another node", func(r *sandbox.Record) { r.Node = "elsewhere" }},
		{"no node", func(r *sandbox.Record) { r.Node = "" }},
		{"another account", func(r *sandbox.Record) { r.Account = "victim" }},
	}
	calls := []struct {
		name string
		call func(t *testing.T, env *trustEnv) (*sandbox.Record, error)
	}{
		{"create", func(t *testing.T, e *trustEnv) (*sandbox.Record, error) {
			return e.c.Create(t.Context(), "acct", "key", service.CreateRequest{})
		}},
		{"extend", func(t *testing.T, e *trustEnv) (*sandbox.Record, error) {
			return e.c.Extend(t.Context(), "acct", e.running.ID, time.Minute)
		}},
		{"stop", func(t *testing.T, e *trustEnv) (*sandbox.Record, error) {
			return e.c.Stop(t.Context(), "acct", e.running.ID)
		}},
		{"set network", func(t *testing.T, e *trustEnv) (*sandbox.Record, error) {
			return e.c.SetNetwork(t.Context(), "acct", e.running.ID, sandbox.Network{})
		}},
		{"resume elsewhere", func(t *testing.T, e *trustEnv) (*sandbox.Record, error) {
			return e.c.Resume(t.Context(), "acct", e.orphan.ID)
		}},
		{"stop elsewhere", func(t *testing.T, e *trustEnv) (*sandbox.Record, error) {
			return e.c.Stop(t.Context(), "acct", e.orphan.ID)
		}},
	}
	for _, call := range calls {
		t.Run(call.name+"/honest", func(t *testing.T) {
			if _, err := call.call(t, newTrustEnv(t, nil)); err != nil {
				t.Errorf("got %v, want the node's record", err)
			}
		})
		for _, l := range lies {
			if call.name == "create" && l.name == "another sandbox" {
				continue // a create's id is the node's to choose
			}
			t.Run(call.name+"/"+l.name, func(t *testing.T) {
				rec, err := call.call(t, newTrustEnv(t, l.lie))
				if sandbox.KindOf(err) != sandbox.KindInternal || !strings.Contains(sandbox.MessageOf(err), "the node answered") || rec != nil {
					t.Errorf("got %+v, %v; want no record and internal: the node answered ...", rec, err)
				}
			})
		}
	}
}

type trustEnv struct {
	c               *cluster.Control
	running, orphan *sandbox.Record
}

// newTrustEnv: node "n1" holds a running sandbox and may restore the
// shared checkpoint of a paused one whose node is gone; its answers are
// changed by lie.
func newTrustEnv(t *testing.T, lie func(*sandbox.Record)) *trustEnv {
	st := storetest.OpenBolt(t)
	ca := mustAuthority(t)
	n := startNode(t, ca, st, "n1")
	gone := startNode(t, ca, st, "gone")
	n.lie = lie
	register(t, st, n, nodeOpts{compat: "c", shared: true})
	register(t, st, gone, nodeOpts{ttl: 50 * time.Millisecond, lost: true})
	return &trustEnv{
		c:       newControl(t, st, ca, nil, 0),
		running: putRecord(t, st, "sb-running", "n1", sandbox.StateRunning, nil),
		orphan:  putRecord(t, st, "sb-orphan", "gone", sandbox.StatePaused, &sandbox.Checkpoint{Shared: true, Compat: "c"}),
	}
}
