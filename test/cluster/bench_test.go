package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestClusterBench prints the cluster rows of the benchmark on the rig:
// creates per second and create -> first command through one API server
// against one, two and three nodes; the exec round trip through the API
// server -> node hop next to a single box's; and the store's share of a
// create, from PostgreSQL's own counters. It measures, it asserts nothing
// about speed; it runs only when asked:
//
//	WITHRUNTIME_CLUSTER_BENCH=1 go test -count=1 -run TestClusterBench -v ./test/cluster/
func TestClusterBench(t *testing.T) {
	if os.Getenv("WITHRUNTIME_CLUSTER_BENCH") == "" {
		t.Skip("a benchmark: WITHRUNTIME_CLUSTER_BENCH=1 runs it")
	}
	const (
		seq   = 10 // sequential creates per node count
		burst = 6  // parallel creates per node count
		execs = 100
	)
	r := newRig(t)
	key := r.account("bench", 0, 0)
	a := r.apis[0]
	body := "{" + small + "}"
	var lines []string
	row := func(name string, s durations) {
		lines = append(lines, fmt.Sprintf("%-56s %9s %9s %9s %5d", name, ms(s.pct(0.5)), ms(s.pct(0.95)), ms(s.pct(0.99)), len(s)))
	}

	// The warm-up: page cache of the image and runsc.
	r.endOwned(key, r.mustCreate(a, key, body).ID)

	// The exec round trip: API server -> node -> agent.
	sb := r.mustCreate(a, key, body)
	rt := r.execSeries(a, key, sb.ID, execs)
	row("cluster: exec round trip `true` (API -> node hop)", rt)

	// The store's share of a create: what PostgreSQL executed for this
	// database during creates, less what the same time idle costs
	// (leases, the detector, metering).
	idleX, idleMs, idleFor := r.pgActivity(t, func() { time.Sleep(10 * time.Second) })
	var createTimes durations
	var made []string
	x, act, took := r.pgActivity(t, func() {
		for range seq {
			start := time.Now()
			s := r.mustCreate(a, key, body)
			createTimes = append(createTimes, time.Since(start))
			made = append(made, s.ID)
		}
	})
	r.endOwned(key, made...)
	perSec := func(v float64, d time.Duration) float64 { return v / d.Seconds() }
	storeMs := (act - perSec(idleMs, idleFor)*took.Seconds()) / seq
	storeX := (float64(x) - perSec(float64(idleX), idleFor)*took.Seconds()) / seq
	r.endOwned(key, sb.ID)
	row("cluster, 3 nodes: create (201) through the API", createTimes)

	for nodes := 3; nodes >= 1; nodes-- {
		if nodes < 3 {
			// One node fewer: stopped, then out of placement once its
			// lease ran out.
			n := r.nodes[nodes]
			n.stop()
			deadline := time.Now().Add(lostWithin)
			for r.nodeEntry(n) != nil && !r.nodeEntry(n).Expired && !r.nodeEntry(n).Lost {
				if time.Now().After(deadline) {
					t.Fatalf("%s still live after it stopped", n.name)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		var first durations
		for range seq {
			start := time.Now()
			s := r.mustCreate(a, key, body)
			if res := r.exec(a, key, s.ID, "true"); res.status != 200 || res.exit != 0 {
				t.Fatalf("first command: %v", res)
			}
			first = append(first, time.Since(start))
			r.endOwned(key, s.ID)
		}
		row(fmt.Sprintf("cluster, %d node(s): create -> first command", nodes), first)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ids []string
		fails := 0
		start := time.Now()
		for range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, s, _ := r.create(a, key, body)
				mu.Lock()
				defer mu.Unlock()
				if st != 201 {
					fails++
					return
				}
				ids = append(ids, s.ID)
			}()
		}
		wg.Wait()
		took := time.Since(start)
		lines = append(lines, fmt.Sprintf("%-56s %9.2f /s (%d of %d in %s, %d refused)", fmt.Sprintf("cluster, %d node(s): creates per second, burst of %d", nodes, burst),
			float64(len(ids))/took.Seconds(), len(ids), burst, took.Round(time.Millisecond), fails))
		r.endOwned(key, ids...)
	}

	// A single box on the same machine: the same exec, in-process.
	single := testenv.StartServer(t)
	sbody := strings.NewReader(body)
	req, _ := http.NewRequest("POST", single.URL+"/v1/sandboxes", sbody)
	req.Header.Set("Authorization", "Bearer "+single.Key)
	resp, err := httpc.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("single box create: %v %v", err, resp)
	}
	var one struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&one)
	resp.Body.Close()
	box := &apiServer{proc: &proc{name: "single"}, url: single.URL}
	row("single box: exec round trip `true`", r.execSeries(box, single.Key, one.ID, execs))

	fmt.Printf("\n%-56s %9s %9s %9s %5s\n", "figure", "median", "p95", "p99", "n")
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Printf("%-56s %9.1f ms, %.1f transactions (PostgreSQL's active time and commits per create, less idle; a statement outside a transaction commits one)\n", "cluster: store's share of a create", storeMs, storeX)
}

// execSeries times n execs of `true` after 10 that open connections.
func (r *rig) execSeries(a *apiServer, key, id string, n int) durations {
	r.t.Helper()
	var s durations
	for i := range n + 10 {
		start := time.Now()
		res := r.exec(a, key, id, "true")
		if res.status != 200 || res.exit != 0 {
			r.t.Fatalf("exec true through %s: %v", a.name, res)
		}
		if i >= 10 {
			s = append(s, time.Since(start))
		}
	}
	return s
}

// pgActivity runs fn and returns how many transactions the run's database
// committed meanwhile and how long its backends were active (ms), from
// pg_stat_database, and the time between the two readings (fn and the
// wait for the counters).
func (r *rig) pgActivity(t *testing.T, fn func()) (int64, float64, time.Duration) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	read := func() (int64, float64) {
		// Backends report their counters about once a second.
		time.Sleep(1500 * time.Millisecond)
		var x int64
		var active float64
		if err := conn.QueryRow(ctx, `select xact_commit, active_time from pg_stat_database where datname = current_database()`).Scan(&x, &active); err != nil {
			t.Fatal(err)
		}
		return x, active
	}
	x0, a0 := read()
	start := time.Now()
	fn()
	x1, a1 := read()
	return x1 - x0, a1 - a0, time.Since(start)
}

type durations []time.Duration

func (s durations) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append(durations(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[int(p*float64(len(c)-1)+0.5)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
