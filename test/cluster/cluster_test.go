package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// lostWithin bounds how long a node that stopped renewing takes to be
// declared lost and its sandboxes ended: its lease, the detector's
// interval, and room for a loaded 2-core machine.
const lostWithin = nodeLease + 4*detectEvery + 20*time.Second

// TestCluster runs the scenarios of many hosts on one rig, in an order
// that needs few restarts: the ones that take nodes away come last.
func TestCluster(t *testing.T) {
	r := newRig(t)
	steps := []struct {
		name string
		run  func(*testing.T, *rig)
	}{
		{"PlacementAndExecThroughBothAPIs", placementAndExec},
		{"APIServerKilledMidCreate", apiKilledMidCreate},
		{"SpendingLimitAcrossNodes", spendingLimitAcrossNodes},
		{"RestartsLoseNothing", restartsLoseNothing},
		{"NodeCutOffFencesItself", nodeCutOff},
		{"NodeKilled", nodeKilled},
		{"PauseHereResumeThere", pauseHereResumeThere},
		{"SnapshotAndForkAcrossAPIs", snapshotAndFork},
		{"VolumeOnItsNode", volumeOnItsNode},
		{"RaceForTheLastSlot", raceForLastSlot},
	}
	for _, s := range steps {
		// Each scenario puts back what it took (a killed node, a cut);
		// one that could not leaves a rig the next would fail on for its
		// reasons.
		r.allLive(t)
		t.Run(s.name, func(t *testing.T) {
			r.t = t
			s.run(t, r)
		})
		r.t = t
	}
}

// allLive fails the test unless every node is live, waiting for a node
// that was just restarted or healed.
func (r *rig) allLive(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(lostWithin)
	for _, n := range r.nodes {
		for !r.nodeLive(n) {
			if n.exited() || time.Now().After(deadline) {
				t.Fatalf("%s is not live (entry %+v): the scenarios after this point would fail for it", n.name, r.nodeEntry(n))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// endOwned ends the sandboxes a scenario made, so that the next one starts
// on empty nodes.
func (r *rig) endOwned(key string, ids ...string) {
	for _, id := range ids {
		r.do(r.apis[0], key, "DELETE", "/v1/sandboxes/"+id, nil)
	}
}

// waitLoad waits until node n reported sandboxes in its lease renewal:
// placement reads what nodes report.
func (r *rig) waitLoad(n *node, sandboxes int) {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if e := r.nodeEntry(n); e != nil && e.Load.Sandboxes == sandboxes {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s did not report %d sandboxes: %+v", n.name, sandboxes, r.nodeEntry(n))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func placementAndExec(t *testing.T, r *rig) {
	key := r.account("placement", 0, 0)
	body := "{" + small + "}"
	var sbs []api.Sandbox
	for i, a := range []*apiServer{r.apis[0], r.apis[1], r.apis[0]} {
		sb := r.mustCreate(a, key, body)
		sbs = append(sbs, sb)
		r.waitLoad(r.byID(sb.Node), 1)
		t.Logf("create %d through %s: %s on %s", i+1, a.name, sb.ID, sb.Node)
	}
	nodes := map[string]bool{}
	for _, sb := range sbs {
		nodes[sb.Node] = true
	}
	if len(nodes) != 3 {
		t.Fatalf("three creates on three empty nodes landed on %d nodes: %v", len(nodes), nodes)
	}
	for _, sb := range sbs {
		for _, a := range r.apis {
			// Through either server, the same record and the same
			// sandbox.
			if got := r.get(a, key, sb.ID); got.Node != sb.Node || got.State != "running" {
				t.Fatalf("%s through %s: node %s state %s, want %s running", sb.ID, a.name, got.Node, got.State, sb.Node)
			}
			want := "hi " + sb.ID + " via " + a.name
			res := r.exec(a, key, sb.ID, fmt.Sprintf("echo %q", want))
			if res.status != 200 || res.exit != 0 || res.stdout != want+"\n" {
				t.Fatalf("exec in %s (node %s) through %s: %v, want exit 0 %q", sb.ID, sb.Node, a.name, res, want)
			}
		}
	}
	r.checkPlacedMetrics()
	for _, sb := range sbs {
		r.endOwned(key, sb.ID)
	}
}

func apiKilledMidCreate(t *testing.T, r *rig) {
	key := r.account("midcreate", 0, 0)
	victim := r.apis[1]
	// A create takes a few hundred milliseconds: kills at points across
	// that, one create each (told apart by their metadata). At least one
	// must be cut short, or the scenario tested nothing.
	delays := []time.Duration{20, 60, 100, 140, 180, 220, 260}
	cut := 0
	for i, d := range delays {
		done := make(chan int, 1)
		go func() {
			st, _, _ := r.create(victim, key, fmt.Sprintf(`{%s,"metadata":{"attempt":"%d"}}`, small, i))
			done <- st
		}()
		time.Sleep(d * time.Millisecond)
		victim.kill9()
		if st := <-done; st == 0 {
			cut++
		}
		r.startAPIProc(victim)
	}
	if cut == 0 {
		t.Fatalf("every create answered before its server was killed: nothing was cut short")
	}
	// Whatever the node did with the create, it settles: running, or
	// ended, or never made. Settled is: nothing starting, and every node's
	// reported load agrees with the listing, for 5 s in a row (a create
	// the node still runs shows in its load first).
	var sbs []api.Sandbox
	deadline := time.Now().Add(60 * time.Second)
	var since time.Time
	for {
		sbs = r.list(r.apis[0], key)
		live := 0
		for _, sb := range sbs {
			if sb.State == "starting" || sb.State == "running" {
				live++
			}
		}
		load := 0
		for _, n := range r.nodes {
			if e := r.nodeEntry(n); e != nil {
				load += e.Load.Sandboxes
			}
		}
		switch {
		case load != live || slices.ContainsFunc(sbs, func(s api.Sandbox) bool { return s.State == "starting" }):
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) > 5*time.Second:
			goto settled
		}
		if time.Now().After(deadline) {
			t.Fatalf("the create cut short did not settle: %d live in the listing, %d in the nodes' loads", live, load)
		}
		time.Sleep(200 * time.Millisecond)
	}
settled:
	per := map[string]int{}
	for _, sb := range sbs {
		per[sb.Metadata["attempt"]]++
	}
	for attempt, n := range per {
		if n > 1 {
			t.Fatalf("create %s, its server killed, made %d sandboxes", attempt, n)
		}
	}
	t.Logf("%d of %d creates cut short by the kill; %d sandboxes made in all", cut, len(delays), len(sbs))
	// Nor did a node keep a sandbox that no record shows.
	for _, n := range r.nodes {
		want := 0
		for _, sb := range sbs {
			if sb.Node == n.id && sb.State == "running" {
				want++
			}
		}
		runsc := filepath.Join(testenv.CacheDir(), "bin", "runsc")
		if got := runscList(runsc, runDir(n.dataDir), n.ns); len(got) != want {
			t.Fatalf("runsc on %s lists %d containers %+v, the records %d", n.name, len(got), got, want)
		}
	}
	var cost int64
	for _, sb := range sbs {
		r.own(key, sb.ID)
		if sb.State == "running" {
			if res := r.exec(r.apis[1], key, sb.ID, "echo alive"); res.status != 200 || res.stdout != "alive\n" {
				t.Fatalf("the sandbox that survived the kill does not answer through the restarted server: %v", res)
			}
		}
		r.endOwned(key, sb.ID)
		end := r.waitFor(r.apis[0], key, sb.ID, 30*time.Second, "ended", func(s api.Sandbox) bool { return s.State == "ended" })
		cost += end.CostMicros
	}
	// Billed once: the ledger is the sandboxes' own cost, not twice it.
	// Each figure is its nanos rounded up to a micro, so the sum of the
	// sandboxes' figures is the ledger's or up to one micro more for each
	// sandbox past the first, never less.
	u := r.usage(r.apis[1], key)
	if d := cost - u.CostMicros; d < 0 || d > int64(max(len(sbs)-1, 0)) {
		t.Fatalf("the ledger says %d micros, the %d sandboxes cost %d", u.CostMicros, len(sbs), cost)
	}
}

func spendingLimitAcrossNodes(t *testing.T, r *rig) {
	// Two idle sandboxes of 1 vCPU and 2 GiB cost about 8.7 micros a
	// second together, for their memory: no busy loop, which would take
	// both cores of the machine from the nodes' lease renewals.
	const limit = 40
	const size = `{"vcpus":1,"memory_mib":2048}`
	key := r.account("limit", 0, limit)
	a := r.apis[0]
	first := r.mustCreate(a, key, size)
	r.waitLoad(r.byID(first.Node), 1)
	second := r.mustCreate(r.apis[1], key, size)
	if first.Node == second.Node {
		t.Fatalf("both sandboxes are on %s: the limit would not cross nodes", first.Node)
	}
	var cost int64
	for _, sb := range []api.Sandbox{first, second} {
		end := r.waitFor(a, key, sb.ID, 90*time.Second, "ended", func(s api.Sandbox) bool { return s.State == "ended" })
		if end.EndReason != "spending_limit" {
			t.Fatalf("%s on %s: end reason %q, want spending_limit", sb.ID, sb.Node, end.EndReason)
		}
		cost += end.CostMicros
	}
	status, _, data := r.create(r.apis[1], key, size)
	if status != 402 || errorCode(data) != "spending_limit_reached" {
		t.Fatalf("a create past the limit: got %d %s, want 402 spending_limit_reached", status, data)
	}
	u := r.usage(a, key)
	if u.CostMicros < limit {
		t.Fatalf("both sandboxes stopped at %d micros, below the limit of %d", u.CostMicros, limit)
	}
	if d := u.CostMicros - cost; d < -2 || d > 2 {
		t.Fatalf("the ledger says %d micros, the two sandboxes cost %d", u.CostMicros, cost)
	}
	t.Logf("stopped at %d micros (limit %d) on %s and %s", u.CostMicros, limit, first.Node, second.Node)
}

func nodeCutOff(t *testing.T, r *rig) {
	key := r.account("cutoff", 0, 0)
	sb := r.mustCreate(r.apis[0], key, "{"+small+"}")
	n := r.byID(sb.Node)
	if res := r.exec(r.apis[0], key, sb.ID, "echo before"); res.status != 200 || res.stdout != "before\n" {
		t.Fatalf("exec before the cut: %v", res)
	}
	if st := runscStatus(n, sb.ID); st != "running" {
		t.Fatalf("runsc on %s says %s is %q, want running", n.name, sb.ID, st)
	}
	epoch := r.nodeEntry(n).Epoch
	r.cut(n)
	// A call that reaches the node just after the cut, before it fenced
	// itself, gets an answer too: the node's own store calls are bounded.
	early := make(chan execResult, 1)
	go func() { early <- r.execWithin(r.apis[1], key, sb.ID, "echo early", 30*time.Second) }()
	healed := false
	defer func() {
		if !healed {
			r.heal(n)
		}
	}()
	// Fenced: its sandbox is frozen, and the node refuses calls, with an
	// answer (a call must not wait for a store it cannot reach).
	deadline := time.Now().Add(20 * time.Second)
	for runscStatus(n, sb.ID) != "paused" {
		if time.Now().After(deadline) {
			t.Fatalf("%s on the cut node is %q, not frozen (paused), 20 s after the cut", sb.ID, runscStatus(n, sb.ID))
		}
		time.Sleep(100 * time.Millisecond)
	}
	res := r.execWithin(r.apis[1], key, sb.ID, "echo during", 30*time.Second)
	if res.status == 0 || res.status == 200 {
		t.Fatalf("exec through the API while the node is fenced: %v, want a refusal", res)
	}
	t.Logf("exec while fenced: %v", res)
	end := r.waitFor(r.apis[0], key, sb.ID, lostWithin, "ended node_lost", func(s api.Sandbox) bool { return s.State == "ended" })
	if end.EndReason != "node_lost" {
		t.Fatalf("end reason %q, want node_lost", end.EndReason)
	}
	if res := r.execWithin(r.apis[0], key, sb.ID, "echo after", 30*time.Second); res.status == 0 || res.status == 200 {
		t.Fatalf("exec in a sandbox ended node_lost: %v", res)
	}
	if !runscHas(n, sb.ID) {
		t.Fatalf("the cut node destroyed %s before it could know it lost it", sb.ID)
	}
	// While it was away the others took the creates.
	other := r.mustCreate(r.apis[1], key, "{"+small+"}")
	if other.Node == n.id {
		t.Fatalf("a create went to the node that was cut off")
	}
	r.endOwned(key, other.ID)

	r.heal(n)
	healed = true
	deadline = time.Now().Add(40 * time.Second)
	for {
		_, dirErr := os.Stat(filepath.Join(n.dataDir, "sandboxes", sb.ID))
		e := r.nodeEntry(n)
		back := e != nil && e.Epoch > epoch && !e.Lost && !e.Expired
		if !runscHas(n, sb.ID) && os.IsNotExist(dirErr) && back {
			t.Logf("%s is back at epoch %d (was %d) without %s", n.name, e.Epoch, epoch, sb.ID)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after healing: runsc lists %s %v, its state dir %v, entry %+v (was epoch %d)", sb.ID, runscHas(n, sb.ID), dirErr, e, epoch)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := r.get(r.apis[1], key, sb.ID); got.State != "ended" || got.EndReason != "node_lost" {
		t.Fatalf("the node's return changed the record: %s %s", got.State, got.EndReason)
	}
	// Checked last, so that the rest of the scenario says what it proves
	// either way.
	if res := <-early; res.status == 0 {
		t.Errorf("exec sent just after the cut, before the node fenced itself: no answer in 30 s (%v): a call the node takes must not wait on a store it cannot reach", res)
	} else {
		t.Logf("exec sent just after the cut: %v", res)
	}
}

func nodeKilled(t *testing.T, r *rig) {
	key := r.account("killed", 0, 0)
	sb := r.mustCreate(r.apis[0], key, "{"+small+"}")
	n := r.byID(sb.Node)
	n.kill9()
	restarted := false
	defer func() {
		if !restarted {
			r.startNode(n)
		}
	}()
	end := r.waitFor(r.apis[1], key, sb.ID, lostWithin, "ended node_lost", func(s api.Sandbox) bool { return s.State == "ended" })
	if end.EndReason != "node_lost" {
		t.Fatalf("end reason %q, want node_lost", end.EndReason)
	}
	if e := r.nodeEntry(n); e == nil || !e.Lost {
		t.Fatalf("the killed node's entry: %+v, want lost", e)
	}
	r.checkLostMetrics(n)
	var ids []string
	for i := range 2 {
		other := r.mustCreate(r.apis[i], key, "{"+small+"}")
		if other.Node == n.id {
			t.Fatalf("create %d went to the killed node", i+1)
		}
		ids = append(ids, other.ID)
	}
	r.endOwned(key, ids...)
	// The node comes back on its data dir: the sandbox it held is not its
	// own any more, and goes.
	r.startNode(n)
	restarted = true
	r.waitNode(n)
	deadline := time.Now().Add(30 * time.Second)
	for runscHas(n, sb.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted node still runs %s, which ended node_lost", sb.ID)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := r.get(r.apis[0], key, sb.ID); got.EndReason != "node_lost" {
		t.Fatalf("the restart changed the record: %s %s", got.State, got.EndReason)
	}
}

func pauseHereResumeThere(t *testing.T, r *rig) {
	key := r.account("migrate", 0, 0)
	sb := r.mustCreate(r.apis[0], key, "{"+small+"}")
	n := r.byID(sb.Node)
	r.makeState(r.apis[0], key, sb.ID)
	if st, data := r.do(r.apis[1], key, "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil); st != 200 {
		t.Fatalf("pause: %d %s", st, data)
	}
	paused := r.get(r.apis[0], key, sb.ID)
	if paused.State != "paused" {
		t.Fatalf("after pause: state %s", paused.State)
	}
	if _, err := os.Stat(filepath.Join(r.shared, sb.ID)); err != nil {
		t.Fatalf("the checkpoint is not in the shared directory: %v", err)
	}
	// Its node goes away; the paused sandbox stays paused, its checkpoint
	// shared.
	n.kill9()
	defer func() {
		r.startNode(n)
		r.waitNode(n)
	}()
	deadline := time.Now().Add(lostWithin)
	for {
		if e := r.nodeEntry(n); e != nil && e.Lost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not declared lost", n.name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * detectEvery) // a detector pass over the lost node's records
	if got := r.get(r.apis[1], key, sb.ID); got.State != "paused" {
		t.Fatalf("a paused sandbox with a shared checkpoint ended with its node: %s %s", got.State, got.EndReason)
	}
	st, data := r.do(r.apis[1], key, "POST", "/v1/sandboxes/"+sb.ID+"/resume", nil)
	if st != 200 {
		t.Fatalf("resume after its node was lost: %d %s", st, data)
	}
	resumed := r.get(r.apis[0], key, sb.ID)
	if resumed.State != "running" || resumed.Node == n.id || resumed.Node == "" {
		t.Fatalf("after resume: state %s on %q, want running on another node than %s", resumed.State, resumed.Node, n.id)
	}
	a, b := r.checkState(r.apis[0], key, sb.ID)
	t.Logf("paused on %s, resumed on %s, counter %d -> %d", n.id, resumed.Node, a, b)
	r.endOwned(key, sb.ID)
}

// makeState starts a counter in sandbox id (a process that writes
// /tmp/count ten times a second) and writes /workspace/file: what a
// sandbox moved or copied whole must still have.
func (r *rig) makeState(a *apiServer, key, id string) {
	r.t.Helper()
	st, data := r.do(a, key, "POST", "/v1/sandboxes/"+id+"/exec",
		`{"cmd":"i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done","background":true}`)
	if st != 201 {
		r.t.Fatalf("starting the counter: %d %s", st, data)
	}
	if res := r.exec(a, key, id, "echo kept > /workspace/file && sleep 1 && cat /tmp/count"); res.status != 200 || res.exit != 0 {
		r.t.Fatalf("writing the state: %v", res)
	}
}

// checkState fails the test unless sandbox id has makeState's file and
// a counter that goes on from where it was; it returns the counter a
// second apart.
func (r *rig) checkState(a *apiServer, key, id string) (int, int) {
	r.t.Helper()
	res := r.exec(a, key, id, "cat /workspace/file; a=$(cat /tmp/count); sleep 1; echo $a $(cat /tmp/count)")
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.status != 200 || len(lines) != 2 || lines[0] != "kept" {
		r.t.Fatalf("in %s: %v, want the file and the counter", id, res)
	}
	counts := strings.Fields(lines[1])
	c0, _ := strconv.Atoi(counts[0])
	c1, _ := strconv.Atoi(counts[len(counts)-1])
	if c0 < 5 || c1 <= c0 {
		r.t.Fatalf("the counter in %s did not go on from where it was: %q", id, lines[1])
	}
	return c0, c1
}

func raceForLastSlot(t *testing.T, r *rig) {
	// Every node admits one vCPU (two CPUs at overcommit 0.5): two
	// sandboxes fill two nodes, and two creates race for the third's.
	for _, n := range r.nodes {
		n.stop()
		n.extra = []string{"--overcommit", "0.5"}
		r.startNode(n)
		r.waitNode(n)
	}
	key := r.account("race", 0, 0)
	var ids []string
	for range 2 {
		sb := r.mustCreate(r.apis[0], key, "{"+small+"}")
		r.waitLoad(r.byID(sb.Node), 1)
		ids = append(ids, sb.ID)
	}
	type answer struct {
		status int
		sb     api.Sandbox
		body   []byte
	}
	answers := make([]answer, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, sb, data := r.create(r.apis[i], key, "{"+small+"}")
			answers[i] = answer{st, sb, data}
		}()
	}
	wg.Wait()
	won, lost := 0, 0
	for _, a := range answers {
		switch {
		case a.status == 201:
			won++
			ids = append(ids, a.sb.ID)
		case a.status == 503 && errorCode(a.body) == "capacity_exhausted":
			lost++
		default:
			t.Fatalf("a racing create: %d %s", a.status, a.body)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("two creates for one slot: %d won, %d refused, want 1 and 1", won, lost)
	}
	nodes := map[string]bool{}
	for _, sb := range r.list(r.apis[0], key) {
		if sb.State == "running" {
			nodes[sb.Node] = true
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("three one-slot nodes hold running sandboxes of %d nodes: %v", len(nodes), nodes)
	}
	r.endOwned(key, ids...)
}
