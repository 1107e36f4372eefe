package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// recorder makes API calls and keeps every answer it got, so that a test
// can say what never appeared in one.
type recorder struct {
	s *testenv.Server
	// isolation is what its boxes ask for ("": the server's default).
	isolation string
	mu        sync.Mutex
	// seen is every response body, CLI output and exec stream so far.
	seen [][]byte
}

func (r *recorder) keep(b []byte) {
	r.mu.Lock()
	r.seen = append(r.seen, bytes.Clone(b))
	r.mu.Unlock()
}

// call is the package's call, recorded.
func (r *recorder) call(t *testing.T, method, path string, body io.Reader) (int, []byte) {
	t.Helper()
	st, data := call(t, r.s, r.s.Key, method, path, body)
	r.keep(data)
	return st, data
}

// cli runs the CLI against the server with stdin, recorded.
func (r *recorder) cli(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testenv.CLI(t), args...)
	cmd.Env = r.s.Env()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running withruntime %v: %v", args, err)
	}
	r.keep(out.Bytes())
	r.keep(errb.Bytes())
	return out.String(), errb.String(), code
}

// box is one sandbox of the egress tests.
type box struct {
	r  *recorder
	ID string
}

// newBox creates a sandbox with the given network policy (JSON), uploads
// the probe script and the test CA, and stops it when the test ends.
func newBox(t *testing.T, r *recorder, networkJSON string, caPEM []byte) *box {
	t.Helper()
	iso := ""
	if r.isolation != "" {
		iso = `,"isolation":"` + r.isolation + `"`
	}
	st, data := r.call(t, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":1,"memory_mib":1024`+iso+`,"network":`+networkJSON+`}`))
	var sb api.Sandbox
	if st != http.StatusCreated || json.Unmarshal(data, &sb) != nil {
		t.Fatalf("create with network %s: %d %s", networkJSON, st, data)
	}
	t.Cleanup(func() { call(t, r.s, r.s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	b := &box{r: r, ID: sb.ID}
	b.put(t, "/workspace/probe.py", []byte(probePy))
	b.put(t, "/workspace/test-ca.pem", caPEM)
	return b
}

func (b *box) put(t *testing.T, path string, data []byte) {
	t.Helper()
	st, body := b.r.call(t, "PUT", "/v1/sandboxes/"+b.ID+"/files?path="+path, bytes.NewReader(data))
	if st != http.StatusOK && st != http.StatusCreated {
		t.Fatalf("upload %s: %d %s", path, st, body)
	}
}

// result is what a command in a sandbox printed and how it ended.
type result struct {
	Out, Err string
	Code     int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.Code, r.Out, r.Err)
}

// sh runs a shell command in the sandbox, as its user, and waits for it.
func (b *box) sh(t *testing.T, cmd string) result {
	t.Helper()
	req, _ := json.Marshal(api.ExecRequest{Cmd: api.Command{Shell: cmd}, TimeoutMs: 60_000})
	st, data := b.r.call(t, "POST", "/v1/sandboxes/"+b.ID+"/exec", bytes.NewReader(req))
	if st != http.StatusOK {
		t.Fatalf("exec %q: %d %s", cmd, st, data)
	}
	var res result
	res.Code = -1
	var out, errs strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("exec %q: bad event %q", cmd, sc.Text())
		}
		switch ev.Type {
		case api.EventStdout:
			out.WriteString(ev.Data)
		case api.EventStderr:
			errs.WriteString(ev.Data)
		case api.EventExit:
			if ev.ExitCode != nil {
				res.Code = *ev.ExitCode
			}
		case api.EventError:
			t.Fatalf("exec %q: error event %s", cmd, sc.Text())
		}
	}
	res.Out, res.Err = out.String(), errs.String()
	return res
}

// probe runs probe.py with args and decodes its JSON answer into v.
func (b *box) probe(t *testing.T, v any, args ...string) result {
	t.Helper()
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	res := b.sh(t, "python3 /workspace/probe.py "+strings.Join(q, " "))
	if res.Code != 0 || json.Unmarshal([]byte(res.Out), v) != nil {
		t.Fatalf("probe %v: %s", args, res)
	}
	return res
}

// egress is the sandbox's egress log from the API.
func (b *box) egress(t *testing.T) []api.EgressEvent {
	t.Helper()
	st, data := b.r.call(t, "GET", "/v1/sandboxes/"+b.ID+"/egress", nil)
	var l api.EgressLog
	if st != http.StatusOK || json.Unmarshal(data, &l) != nil {
		t.Fatalf("egress log: %d %s", st, data)
	}
	return l.Events
}

// events returns the sandbox's egress events after the first skip ones
// that match keep.
func events(all []api.EgressEvent, skip int, keep func(api.EgressEvent) bool) []api.EgressEvent {
	var out []api.EgressEvent
	for _, e := range all[min(skip, len(all)):] {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// logMark is how many events the sandbox's log holds now.
func (b *box) logMark(t *testing.T) int { return len(b.egress(t)) }

// expectEvent fails unless the log, after skip, has an event of the name
// or address with that verdict (and a reason containing reason).
func (b *box) expectEvent(t *testing.T, skip int, nameOrAddr, verdict, reason string) api.EgressEvent {
	t.Helper()
	// The proxy logs a refusal as it closes the connection; the sandbox's
	// client may have ended a moment before that.
	deadline := time.Now().Add(3 * time.Second)
	for {
		all := b.egress(t)
		got := events(all, skip, func(e api.EgressEvent) bool {
			return (e.Name == nameOrAddr || e.Address == nameOrAddr) && e.Verdict == verdict && strings.Contains(e.Reason, reason)
		})
		if len(got) > 0 {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %s (reason %q) in the egress log; after %d it has:\n%s", verdict, nameOrAddr, reason, skip, fmtEvents(all[min(skip, len(all)):]))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// expectNoAllowed fails if the log, after skip, allowed anything to the
// name or address.
func (b *box) expectNoAllowed(t *testing.T, skip int, nameOrAddr string) {
	t.Helper()
	all := b.egress(t)
	if got := events(all, skip, func(e api.EgressEvent) bool {
		return (e.Name == nameOrAddr || e.Address == nameOrAddr) && e.Verdict == "allowed"
	}); len(got) > 0 {
		t.Fatalf("the egress log allowed %s:\n%s", nameOrAddr, fmtEvents(got))
	}
}

func fmtEvents(evs []api.EgressEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s name=%q addr=%s port=%d %s %q\n", e.Time.Format("15:04:05.000"), e.Kind, e.Name, e.Address, e.Port, e.Verdict, e.Reason)
	}
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// curl runs curl in the sandbox with short timeouts and returns the HTTP
// status (000 when there was none) and how curl ended.
func (b *box) curl(t *testing.T, args string) (status string, res result) {
	t.Helper()
	res = b.sh(t, "curl -sS --connect-timeout 5 -m 15 -o /workspace/body -w '%{http_code}' "+args+"; echo \" $?\"; cat /workspace/body 2>/dev/null; rm -f /workspace/body")
	line, body, _ := strings.Cut(res.Out, "\n")
	f := strings.Fields(line)
	if len(f) != 2 {
		t.Fatalf("curl %s: %s", args, res)
	}
	code, _ := strconv.Atoi(f[1])
	return f[0], result{Out: body, Err: res.Err, Code: code}
}

// noProxyVariables fails if the sandbox's commands have any proxy
// variable: every test here connects directly, as a program that ignores
// such variables would, and still meets the platform's rules.
func (b *box) noProxyVariables(t *testing.T) {
	t.Helper()
	if res := b.sh(t, "env | grep -i '_proxy=' || true"); strings.TrimSpace(res.Out) != "" {
		t.Fatalf("the sandbox has proxy variables: %s", res.Out)
	}
}

// forIsolations runs an egress test against each isolation tier, each on
// a server of its own: the packet rules, the proxy and the resolver must
// hold for a microVM (under TCG here) exactly as for gVisor.
func forIsolations(t *testing.T, f func(t *testing.T, isolation string, flags ...string)) {
	for _, iso := range []string{"gvisor", "microvm"} {
		t.Run(iso, func(t *testing.T) {
			if iso == "microvm" {
				testenv.RequiresMicroVM(t)
				f(t, iso, "--microvm-accel", "tcg")
				return
			}
			f(t, iso)
		})
	}
}
