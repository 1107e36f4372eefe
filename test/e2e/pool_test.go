package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

var memberReady = regexp.MustCompile(`msg="pool member ready" sandbox=(sbx[0-9a-f]+)`)

// poolMembers lists the members the server's log says it booted, in
// order, and waits until there are at least n.
func poolMembers(t *testing.T, s *testenv.Server, n int) []string {
	t.Helper()
	return poolMembersWithin(t, s, n, 90*time.Second)
}

// poolMembersWithin is poolMembers with a wait of its own.
func poolMembersWithin(t *testing.T, s *testenv.Server, n int, wait time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		var ids []string
		for _, m := range memberReady.FindAllStringSubmatch(s.Log.String(), -1) {
			ids = append(ids, m[1])
		}
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pool members ready after %v, want %d; log:\n%s", len(ids), wait, n, s.Log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cpuPriority reads a sandbox's CPU priority from its cgroup: cpu.shares
// on v1 hierarchies, cpu.weight on a unified one.
func cpuPriority(t *testing.T, id string) string {
	t.Helper()
	for _, f := range []string{"/sys/fs/cgroup/cpu/withruntime/" + id + "/cpu.shares", "/sys/fs/cgroup/withruntime/" + id + "/cpu.weight"} {
		if b, err := os.ReadFile(f); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no CPU cgroup for %s", id)
	return ""
}

// TestPool runs warm pools on gVisor: what a claimed sandbox is given,
// that it is fresh, that members are nobody's, and that claims under
// concurrency and a restart never hand one out twice.
func TestPool(t *testing.T) {
	u := newUpstreams(t)
	s := testenv.StartServer(t, append(u.serverFlags(), "--pool", "1x1024=2", "--overcommit", "16")...)
	r := &recorder{s: s}
	warm := poolMembers(t, s, 2)
	handed := map[string]bool{}
	take := func(t *testing.T, id string) {
		t.Helper()
		if handed[id] {
			t.Fatalf("sandbox %s handed out twice", id)
		}
		handed[id] = true
	}

	// The first user: a claimed member gets the create's env, network
	// policy and lease, and leaves marks behind.
	first := newBox(t, r, `{"internet":true,"allow":["allowed.example.test"]}`, u.CAPEM)
	take(t, first.ID)
	if first.ID != warm[0] {
		t.Fatalf("create got %s, want the oldest warm member %s", first.ID, warm[0])
	}
	if st, res := first.curl(t, "--cacert /workspace/test-ca.pem https://allowed.example.test/"); st != "200" {
		t.Fatalf("allowed host from a claimed member: %s %s", st, res)
	}
	if st, _ := first.curl(t, "--cacert /workspace/test-ca.pem https://denied.example.test/"); st == "200" {
		t.Fatal("a host outside the allow list answered a claimed member")
	}
	bootA := strings.TrimSpace(first.sh(t, "touch /tmp/marker /workspace/marker && echo $$ > /tmp/pid; cat /proc/sys/kernel/random/boot_id").Out)

	// Env: the create's variables reach every command.
	st, data := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":1024,"env":{"GREETING":"hello pool"},"metadata":{"who":"second"}}`))
	var second api.Sandbox
	if st != http.StatusCreated || json.Unmarshal(data, &second) != nil {
		t.Fatalf("create: %d %s", st, data)
	}
	take(t, second.ID)
	b := &box{r: r, ID: second.ID}
	if second.ID != warm[1] {
		t.Errorf("second create got %s, want the warm %s", second.ID, warm[1])
	}
	if got := b.sh(t, "echo $GREETING; ls /tmp/marker /workspace/marker 2>&1; cat /proc/sys/kernel/random/boot_id").Out; !strings.HasPrefix(got, "hello pool\n") ||
		!strings.Contains(got, "No such file") || strings.Contains(got, bootA) {
		t.Errorf("second user's sandbox: %q, want its env, no marker of the first and another boot id than %s", got, bootA)
	}
	if second.Metadata["who"] != "second" || second.State != "running" {
		t.Errorf("claimed sandbox: %+v", second)
	}

	// A claimed member runs at the normal CPU priority, the members still
	// waiting at the lowest (cgroup v1 cpu.shares, or v2 cpu.weight).
	if got := cpuPriority(t, second.ID); got != "1024" && got != "100" {
		t.Errorf("claimed sandbox's CPU priority %q, want the default (1024 shares or weight 100)", got)
	}

	// Pause and resume keep what the claim gave.
	if st, data := call(t, s, s.Key, "POST", "/v1/sandboxes/"+second.ID+"/pause", nil); st != 200 {
		t.Fatalf("pause: %d %s", st, data)
	}
	if st, data := call(t, s, s.Key, "POST", "/v1/sandboxes/"+second.ID+"/resume", nil); st != 200 {
		t.Fatalf("resume: %d %s", st, data)
	}
	if got := b.sh(t, "echo $GREETING").Out; got != "hello pool\n" {
		t.Errorf("env after resume: %q", got)
	}
	if got := cpuPriority(t, second.ID); got != "1024" && got != "100" {
		t.Errorf("CPU priority after resume %q, want the default", got)
	}

	// Members are nobody's: the listing shows only what was created.
	refilled := poolMembers(t, s, 4)[2:]
	for _, id := range refilled {
		if got := cpuPriority(t, id); got != "2" && got != "1" {
			t.Errorf("waiting member %s at CPU priority %q, want the lowest (2 shares or weight 1)", id, got)
		}
	}
	st, data = call(t, s, s.Key, "GET", "/v1/sandboxes?all=true", nil)
	var list api.SandboxList
	if st != 200 || json.Unmarshal(data, &list) != nil {
		t.Fatalf("list: %d %s", st, data)
	}
	for _, sb := range list.Sandboxes {
		for _, id := range refilled {
			if sb.ID == id {
				t.Errorf("pool member %s is listed", id)
			}
		}
	}
	if len(list.Sandboxes) != 2 {
		t.Errorf("listed %d sandboxes, want the 2 created", len(list.Sandboxes))
	}

	// Four parallel creates on a pool of two: all answered, none twice.
	var mu sync.Mutex
	var wg sync.WaitGroup
	got := map[string]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, data := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":1024}`))
			var sb api.Sandbox
			if st != http.StatusCreated || json.Unmarshal(data, &sb) != nil {
				t.Errorf("parallel create: %d %s", st, data)
				return
			}
			mu.Lock()
			got[sb.ID]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	fromPool := 0
	for id, n := range got {
		if n > 1 || handed[id] {
			t.Errorf("sandbox %s handed out twice", id)
		}
		handed[id] = true
		for _, w := range refilled {
			if id == w {
				fromPool++
			}
		}
		call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+id, nil)
	}
	if fromPool != 2 {
		t.Errorf("%d of 4 parallel creates took a warm member, want 2", fromPool)
	}

	// A server killed with its pool warm: the next one removes the
	// members (they have no record) and never hands one out.
	before := poolMembers(t, s, 6)
	s.Stop(true)
	s.Start()
	for _, id := range before[4:] {
		for _, left := range leftovers(t, s.DataDir, []string{id}) {
			// Processes and mounts are matched by data dir: the new
			// server's own members are there too.
			if strings.Contains(left, id) {
				t.Errorf("member %s of the killed server left: %s", id, left)
			}
		}
	}
	st, data = call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":1024}`))
	var after api.Sandbox
	if st != http.StatusCreated || json.Unmarshal(data, &after) != nil {
		t.Fatalf("create after the restart: %d %s", st, data)
	}
	for _, id := range before {
		if after.ID == id {
			t.Errorf("the restarted server handed out %s, a member of the killed one", id)
		}
	}
}
