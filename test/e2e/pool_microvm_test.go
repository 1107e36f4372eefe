package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/hostcgroup"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestPoolMicroVM: on a server whose default is the microVM tier, the
// warm pool holds microVMs waiting at the lowest CPU priority; a create
// takes one, which then has the create's env, network policy and the
// default priority (the pool's refills are the manager's, tested with
// gVisor).
func TestPoolMicroVM(t *testing.T) {
	testenv.RequiresMicroVM(t)
	u := newUpstreams(t)
	s := testenv.StartServer(t, append(u.serverFlags(), "--isolation", "microvm", "--microvm-accel", "tcg", "--pool", "1x1024=1", "--overcommit", "16")...)
	r := &recorder{s: s}
	cg := hostcgroup.Host("withruntime-vm")
	priority := func(id string) (got, warm, normal string) {
		t.Helper()
		got, warm, normal, err := hostcgroup.CPUPriority(cg, id)
		if err != nil {
			t.Fatalf("CPU priority of %s: %v", id, err)
		}
		return got, warm, normal
	}
	// At the lowest CPU priority on a busy host, a TCG boot may take long.
	member := poolMembersWithin(t, s, 1, 5*time.Minute)[0]
	if got, warm, _ := priority(member); got != warm {
		t.Errorf("a waiting member's CPU priority: got %s, want %s", got, warm)
	}

	st, data := r.call(t, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":1024,"env":{"GREETING":"hello vm pool"},"network":{"internet":true,"allow":["allowed.example.test"]}}`))
	var sb api.Sandbox
	if st != http.StatusCreated || json.Unmarshal(data, &sb) != nil {
		t.Fatalf("create: %d %s", st, data)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	if sb.ID != member || sb.Isolation != "microvm" {
		t.Fatalf("create got %s (%s), want the warm microVM %s", sb.ID, sb.Isolation, member)
	}
	b := &box{r: r, ID: sb.ID}
	b.put(t, "/workspace/test-ca.pem", u.CAPEM)
	if got := b.sh(t, "echo $GREETING").Out; !strings.HasPrefix(got, "hello vm pool\n") {
		t.Errorf("the claimed microVM: got %q, want the create's env", got)
	}
	if st, res := b.curl(t, "--cacert /workspace/test-ca.pem https://allowed.example.test/"); st != "200" {
		t.Errorf("allowed host from a claimed microVM: %s %s", st, res)
	}
	if st, _ := b.curl(t, "--cacert /workspace/test-ca.pem https://denied.example.test/"); st == "200" {
		t.Error("a host outside the allow list answered a claimed microVM")
	}
	if got, _, normal := priority(sb.ID); got != normal {
		t.Errorf("the claimed microVM's CPU priority: got %s, want %s", got, normal)
	}
}
