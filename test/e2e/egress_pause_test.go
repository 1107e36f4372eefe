package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/testenv"
)

// flood runs floodPy in b: n connections to the holder, reported in
// /tmp/<name>.json; it returns the report once every connection was tried.
func flood(t *testing.T, b *box, n int, name string) floodStatus {
	t.Helper()
	report := "/tmp/" + name + ".json"
	start := b.sh(t, fmt.Sprintf("sudo setsid python3 /workspace/flood.py %d %s %s %s >/tmp/%s.out 2>&1 </dev/null & echo started", n, upAllowed, holdPort, report, name))
	if start.Code != 0 {
		t.Fatalf("starting flood %s: %s", name, start)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		last := b.sh(t, fmt.Sprintf("cat %s 2>/dev/null || true; cat /tmp/%s.out >&2", report, name))
		var st floodStatus
		if json.Unmarshal([]byte(last.Out), &st) == nil && st.Done {
			t.Logf("flood %s: %+v", name, st)
			if st.Connected != n {
				t.Fatalf("flood %s: the sandbox connected %d of %d (the proxy accepts every one and closes those past a limit): %+v", name, st.Connected, n, st)
			}
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s flood %s has not finished connecting: %s", name, last)
		}
	}
}

// refusals counts b's refused connections to the holder whose reason
// starts with reason.
func refusals(t *testing.T, b *box, reason string) int {
	t.Helper()
	n := 0
	for _, e := range b.egress(t) {
		if e.Verdict == "refused" && strings.HasPrefix(e.Reason, reason) && e.Address == upAllowed {
			n++
		}
	}
	return n
}

// TestEgressPauseAndAccountLimit: two sandboxes of one account share the
// account's connection limit besides each one's own; pausing one closes
// every connection it had through the proxy, at both ends (the upstream
// lets go of them, the server's descriptors drop), and gives the room back
// to the account; resumed, it connects again within what is left. Before,
// a paused sandbox kept its connections until their idle timeout, and
// paused sandboxes do not count against an account's concurrency.
func TestEgressPauseAndAccountLimit(t *testing.T) { forIsolations(t, testEgressPauseAndAccountLimit) }

func testEgressPauseAndAccountLimit(t *testing.T, isolation string, flags ...string) {
	const (
		perSandbox = 200
		perAccount = 300
	)
	u := newUpstreams(t)
	h := newHolder(t, u)
	s := testenv.StartServer(t, append(append(u.serverFlags(),
		"--egress-max-conns", fmt.Sprint(perSandbox), "--egress-max-conns-account", fmt.Sprint(perAccount)), flags...)...)
	pid := s.Pid()
	r := &recorder{s: s, isolation: isolation}
	a := newBox(t, r, `{"internet":true}`, u.CAPEM)
	b := newBox(t, r, `{"internet":true}`, u.CAPEM)
	for _, x := range []*box{a, b} {
		x.put(t, "/workspace/flood.py", []byte(floodPy))
	}
	holds := func(what string, want int) {
		t.Helper()
		pollFor(t, 30*time.Second, fmt.Sprintf("%s: the upstream does not hold %d connections", what, want), func() bool {
			open, _ := h.counts()
			return open == want
		})
	}
	baseFDs := fdCount(t, pid)

	// A takes its own limit, B what its account has left.
	flood(t, a, 2*perSandbox, "a1")
	holds("A flooded", perSandbox)
	if n := refusals(t, a, "connection limit"); n == 0 {
		t.Errorf("A's egress log has no refusal for its connection limit:\n%s", fmtEvents(a.egress(t)))
	}
	flood(t, b, 2*perSandbox, "b1")
	holds("B flooded", perAccount)
	if n := refusals(t, b, "account connection limit"); n == 0 {
		t.Errorf("B's egress log has no refusal for the account's connection limit:\n%s", fmtEvents(b.egress(t)))
	}
	if _, peak := h.counts(); peak > perAccount {
		t.Errorf("the upstream held %d connections of one account at once, want at most %d", peak, perAccount)
	}
	floodFDs := fdCount(t, pid)

	// A pauses: its connections go, at both ends.
	if st, data := r.call(t, "POST", "/v1/sandboxes/"+a.ID+"/pause", nil); st != 200 {
		t.Fatalf("pausing A: %d %s", st, data)
	}
	holds("A paused", perAccount-perSandbox)
	// Two descriptors for each of B's connections, and the server's own.
	pollFor(t, 30*time.Second, "the server's descriptors did not go down with A's pause", func() bool {
		return fdCount(t, pid) <= baseFDs+2*(perAccount-perSandbox)+50
	})
	if n := closeWait(t, pid); n > 0 {
		t.Errorf("the server has %d sockets in CLOSE-WAIT after A paused", n)
	}
	t.Logf("server descriptors: %d before the floods, %d with the account at its limit, %d with A paused", baseFDs, floodFDs, fdCount(t, pid))

	// The account has its room back: B reaches its own limit.
	flood(t, b, perSandbox, "b2")
	holds("B flooded again", perSandbox)

	// A resumes and connects again, within what the account has left.
	if st, data := r.call(t, "POST", "/v1/sandboxes/"+a.ID+"/resume", nil); st != 200 {
		t.Fatalf("resuming A: %d %s", st, data)
	}
	before := refusals(t, a, "account connection limit")
	flood(t, a, perSandbox, "a2")
	holds("A resumed and flooded", perAccount)
	if n := refusals(t, a, "account connection limit"); n <= before {
		t.Errorf("the resumed A's egress log has no refusal for the account's connection limit:\n%s", fmtEvents(a.egress(t)))
	}
}
