package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/internal/network"
	"github.com/withruntime/withruntime/internal/testenv"
)

// holdPort is where the flood goes: a listener in the upstream namespace
// that holds every connection open until its peer closes it.
const holdPort = "7000"

// floodPy opens argv[1] connections to argv[2]:argv[3], one after the
// other, keeps them, and writes what became of them to argv[4] (default
// /tmp/flood.json) every half second: how many connected, how many the
// far end closed.
const floodPy = `
import json, os, resource, select, socket, sys, time
n, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
out = sys.argv[4] if len(sys.argv) > 4 else "/tmp/flood.json"
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
want = n + 100
resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
socks, errors = [], {}
def report(done, closed):
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"done": done, "connected": len(socks), "closed": closed, "errors": errors}, f)
    os.rename(tmp, out)
for i in range(n):
    try:
        s = socket.create_connection((host, port), timeout=10)
        socks.append(s)
    except OSError as e:
        errors[str(e)] = errors.get(str(e), 0) + 1
    if i % 200 == 0:
        report(False, 0)
poller, byfd, closed = select.poll(), {}, set()
for s in socks:
    poller.register(s, select.POLLIN)
    byfd[s.fileno()] = s
while True:
    for fd, ev in poller.poll(0):
        try:
            gone = byfd[fd].recv(1) == b""
        except OSError:
            gone = True
        if gone:
            closed.add(fd)
            poller.unregister(fd)
    report(True, len(closed))
    time.sleep(0.5)
`

// floodStatus is floodPy's report.
type floodStatus struct {
	Done      bool
	Connected int
	Closed    int
	Errors    map[string]int
}

// holder is the listener on holdPort and the connections it holds.
type holder struct {
	l    net.Listener
	mu   sync.Mutex // guards open, peak
	open int
	peak int
}

// newHolder listens on upAllowed:holdPort inside the upstream namespace.
func newHolder(t *testing.T, u *upstreams) *holder {
	t.Helper()
	h := &holder{}
	err := network.InNamespace(filepath.Join(u.dir, "upstream-ns"), func() error {
		var err error
		h.l, err = net.Listen("tcp4", net.JoinHostPort(upAllowed, holdPort))
		return err
	})
	if err != nil {
		t.Fatalf("listening on %s:%s in the upstream namespace: %v", upAllowed, holdPort, err)
	}
	t.Cleanup(func() { h.l.Close() })
	go func() {
		for {
			c, err := h.l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.open++
			h.peak = max(h.peak, h.open)
			h.mu.Unlock()
			go func() {
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				c.Close()
				h.mu.Lock()
				h.open--
				h.mu.Unlock()
			}()
		}
	}()
	return h
}

func (h *holder) counts() (open, peak int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open, h.peak
}

// fdCount is how many descriptors process pid has open.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// closeWait is how many of process pid's TCP sockets are in CLOSE-WAIT:
// the peer closed, the process did not.
func closeWait(t *testing.T, pid int) int {
	t.Helper()
	mine := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			mine[strings.TrimSuffix(inode, "]")] = true
		}
	}
	n := 0
	for _, table := range []string{"tcp", "tcp6"} {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 9 && f[3] == "08" && mine[f[9]] { // 08: CLOSE_WAIT
				n++
			}
		}
	}
	return n
}

// pollFor polls cond for up to d: liveness, not speed.
func pollFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// limitFiles lowers process pid's open files limit (soft and hard) to n;
// the processes it starts from then on inherit it.
func limitFiles(t *testing.T, pid int, n uint64) {
	t.Helper()
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}, nil); err != nil {
		t.Fatalf("limiting the server's open files: %v", err)
	}
}

// TestEgressFlood: one sandbox with the internet opens far more
// connections than it may hold to an upstream that holds them all, from a
// server whose open files limit they would exhaust without the
// per-sandbox cap (before it, the proxy's accept loop died at EMFILE and
// every sandbox's egress with it). Another sandbox's egress and exec keep
// working during and after; once the flooder ends, its connections are
// gone from the server (descriptors back down, nothing in CLOSE-WAIT).
func TestEgressFlood(t *testing.T) { forIsolations(t, testEgressFlood) }

func testEgressFlood(t *testing.T, isolation string, flags ...string) {
	const (
		flood    = 3000
		maxConns = 1024 // the default of --egress-max-conns
		// fileLimit holds the cap's 2 × 1024 descriptors and the
		// server's own, but not the flood's 2 × 3000.
		fileLimit = 3072
	)
	u := newUpstreams(t)
	h := newHolder(t, u)
	s := testenv.StartServer(t, append(u.serverFlags(), flags...)...)
	pid := s.Pid()
	limitFiles(t, pid, fileLimit)
	r := &recorder{s: s, isolation: isolation}
	flooder := newBox(t, r, `{"internet":true}`, u.CAPEM)
	neighbour := newBox(t, r, `{"internet":true,"allow":["allowed.example.test"]}`, u.CAPEM)
	flooder.put(t, "/workspace/flood.py", []byte(floodPy))

	// neighbourWorks checks the other sandbox's exec and its egress.
	neighbourWorks := func(when string) {
		t.Helper()
		if res := neighbour.sh(t, "echo alive"); res.Code != 0 || res.Out != "alive\n" {
			t.Fatalf("%s: the neighbour's exec: %s", when, res)
		}
		res := neighbour.sh(t, `python3 -c "import urllib.request; print(urllib.request.urlopen('http://allowed.example.test/', timeout=20).read().decode())"`)
		if res.Code != 0 || !strings.Contains(res.Out, "hello from allowed.example.test over http") {
			t.Fatalf("%s: the neighbour's HTTP GET: %s", when, res)
		}
	}
	neighbourWorks("before the flood")
	baseFDs := fdCount(t, pid)

	start := flooder.sh(t, fmt.Sprintf("sudo setsid python3 /workspace/flood.py %d %s %s >/tmp/flood.out 2>&1 </dev/null & echo started", flood, upAllowed, holdPort))
	if start.Code != 0 {
		t.Fatalf("starting the flood: %s", start)
	}
	var st floodStatus
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		last := flooder.sh(t, "cat /tmp/flood.json 2>/dev/null || true; cat /tmp/flood.out >&2")
		st = floodStatus{}
		if json.Unmarshal([]byte(last.Out), &st) == nil && st.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the flood has not finished connecting: %s", last)
		}
	}
	t.Logf("flood: %+v", st)
	if st.Connected != flood {
		t.Fatalf("the sandbox connected %d of %d (the proxy accepts every one and closes those past the cap): %+v", st.Connected, flood, st)
	}
	pollFor(t, 30*time.Second, "the upstream does not hold the cap's connections", func() bool {
		open, _ := h.counts()
		return open == maxConns
	})

	// During the flood.
	neighbourWorks("during the flood")
	duringFDs := fdCount(t, pid)
	t.Logf("server descriptors: %d before the flood, %d during it (limit %d)", baseFDs, duringFDs, fileLimit)
	refused := 0
	for _, e := range flooder.egress(t) {
		if e.Verdict == "refused" && strings.Contains(e.Reason, "connection limit") && e.Address == upAllowed {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("the flooder's egress log has no refusal for the connection limit:\n%s", fmtEvents(flooder.egress(t)))
	}
	pollFor(t, 30*time.Second, "the flooder does not see the refused connections closed", func() bool {
		res := flooder.sh(t, "cat /tmp/flood.json")
		return json.Unmarshal([]byte(res.Out), &st) == nil && st.Closed >= flood-maxConns
	})
	if _, peak := h.counts(); peak > maxConns {
		t.Errorf("the upstream held %d connections of one sandbox at once, want at most %d", peak, maxConns)
	}

	// The flooder ends: everything it held goes, at both ends.
	if st, data := r.call(t, "DELETE", "/v1/sandboxes/"+flooder.ID, nil); st != 200 && st != 204 {
		t.Fatalf("deleting the flooder: %d %s", st, data)
	}
	pollFor(t, 30*time.Second, "the upstream still holds the ended sandbox's connections", func() bool {
		open, _ := h.counts()
		return open == 0
	})
	pollFor(t, 30*time.Second, "the server's descriptors did not go back down", func() bool {
		return fdCount(t, pid) <= baseFDs+50
	})
	if n := closeWait(t, pid); n > 0 {
		t.Errorf("the server has %d sockets in CLOSE-WAIT after the flooder ended", n)
	}
	t.Logf("server descriptors after the flooder ended: %d", fdCount(t, pid))
	neighbourWorks("after the flooder ended")
}

// TestEgressPermit: the test upstreams' prefix (198.18.0.0/15) is on the
// production blocklist; only serve --egress-permit opens it.
func TestEgressPermit(t *testing.T) { forIsolations(t, testEgressPermit) }

func testEgressPermit(t *testing.T, isolation string, flags ...string) {
	u := newUpstreams(t)
	get := `python3 -c "import urllib.request; print(urllib.request.urlopen('http://allowed.example.test/', timeout=20).read().decode())"`
	for _, tc := range []struct {
		name    string
		flags   []string
		allowed bool
	}{
		{"without the flag", []string{"--egress-hosts", u.HostsFile, "--egress-ca", u.CAFile}, false},
		{"with --egress-permit", u.serverFlags(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testenv.StartServer(t, append(tc.flags, flags...)...)
			r := &recorder{s: s, isolation: isolation}
			b := newBox(t, r, `{"internet":true}`, u.CAPEM)
			mark := u.mark()
			res := b.sh(t, get)
			reached := len(u.requestsSince(mark, at(upAllowed))) > 0
			if got := res.Code == 0 && strings.Contains(res.Out, "hello from allowed.example.test"); got != tc.allowed || reached != tc.allowed {
				t.Fatalf("GET http://allowed.example.test/ (%s): %s, upstream reached %v; want allowed %v", upAllowed, res, reached, tc.allowed)
			}
			// The literal address too, not only the name.
			var lit tcpAnswer
			b.probe(t, &lit, "tcp", upAllowed, "22")
			if !tc.allowed {
				b.expectEvent(t, 0, upAllowed, "refused", "blocked address")
				settle()
				if got := u.arrivalsSince(mark, "", upAllowed); len(got) > 0 {
					t.Errorf("without a permit, the upstream saw %+v (probe: %+v)", got, lit)
				}
			} else if lit.Data != banner {
				t.Errorf("with a permit, opaque TCP to %s:22: %+v, want the banner", upAllowed, lit)
			}
		})
	}
}
