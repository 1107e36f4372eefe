package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
)

// httpc bounds every call: a test must fail, never hang, on a call that
// nobody answers.
var httpc = &http.Client{Timeout: 3 * time.Minute}

// small is the size of every sandbox of the tier: a 2-core machine runs a
// handful.
const small = `"vcpus":1,"memory_mib":512`

// do makes one API request to server a with key and returns the status and
// body (status 0 with the error as body when the request failed).
func (r *rig) do(a *apiServer, key, method, path string, body any) (int, []byte) {
	return r.doWithin(a, key, method, path, body, 0)
}

func (r *rig) doWithin(a *apiServer, key, method, path string, body any, within time.Duration) (int, []byte) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.url+path, rd)
	if err != nil {
		return 0, []byte(err.Error())
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := httpc
	if within > 0 {
		c = &http.Client{Timeout: within}
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func errorCode(body []byte) string {
	var e api.ErrorBody
	json.Unmarshal(body, &e)
	return e.Error.Code
}

// create asks a for a sandbox; a created one is destroyed at the end.
func (r *rig) create(a *apiServer, key, body string) (int, api.Sandbox, []byte) {
	status, data := r.do(a, key, "POST", "/v1/sandboxes", body)
	var sb api.Sandbox
	if status == 201 {
		json.Unmarshal(data, &sb)
		r.own(key, sb.ID)
	}
	return status, sb, data
}

func (r *rig) own(key, id string) {
	r.mu.Lock()
	r.created = append(r.created, owned{key, id})
	r.mu.Unlock()
}

// mustCreate is create that fails the test unless it made a sandbox.
func (r *rig) mustCreate(a *apiServer, key, body string) api.Sandbox {
	r.t.Helper()
	status, sb, data := r.create(a, key, body)
	if status != 201 {
		r.t.Fatalf("create through %s: got %d %s, want 201", a.name, status, data)
	}
	if sb.Node == "" {
		r.t.Fatalf("create through %s: the sandbox names no node: %s", a.name, data)
	}
	return sb
}

func (r *rig) get(a *apiServer, key, id string) api.Sandbox {
	r.t.Helper()
	status, data := r.do(a, key, "GET", "/v1/sandboxes/"+id, nil)
	if status != 200 {
		r.t.Fatalf("get %s through %s: %d %s", id, a.name, status, data)
	}
	var sb api.Sandbox
	json.Unmarshal(data, &sb)
	return sb
}

func (r *rig) list(a *apiServer, key string) []api.Sandbox {
	r.t.Helper()
	status, data := r.do(a, key, "GET", "/v1/sandboxes", nil)
	if status != 200 {
		r.t.Fatalf("list through %s: %d %s", a.name, status, data)
	}
	var l api.SandboxList
	json.Unmarshal(data, &l)
	return l.Sandboxes
}

// execResult is a foreground exec: the HTTP status, the error code of a
// refusal, and the command's output and exit code.
type execResult struct {
	status int
	code   string
	stdout string
	exit   int
}

func (e execResult) String() string {
	return fmt.Sprintf("status %d code %q exit %d stdout %q", e.status, e.code, e.exit, e.stdout)
}

// exec runs a shell command in the sandbox through a and reads its stream.
func (r *rig) exec(a *apiServer, key, id, cmd string) execResult {
	return r.execWithin(a, key, id, cmd, 0)
}

// execWithin is exec whose call gives up after within (0: httpc's bound):
// status 0 then says nobody answered.
func (r *rig) execWithin(a *apiServer, key, id, cmd string, within time.Duration) execResult {
	status, data := r.doWithin(a, key, "POST", "/v1/sandboxes/"+id+"/exec", fmt.Sprintf(`{"cmd":%q,"timeout_ms":60000}`, cmd), within)
	res := execResult{status: status, exit: -1}
	if status != 200 {
		res.code = errorCode(data)
		if res.code == "" {
			res.code = string(data)
		}
		return res
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev api.ExecEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch ev.Type {
		case api.EventStdout:
			out, _ := ev.Output()
			res.stdout += out
		case api.EventExit:
			if ev.ExitCode != nil {
				res.exit = *ev.ExitCode
			}
		case api.EventError:
			if ev.Error != nil {
				res.code = ev.Error.Code
			}
		}
	}
	return res
}

// waitFor polls the sandbox through a until ok says so, and returns it.
func (r *rig) waitFor(a *apiServer, key, id string, within time.Duration, what string, ok func(api.Sandbox) bool) api.Sandbox {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		sb := r.get(a, key, id)
		if ok(sb) {
			return sb
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("sandbox %s: not %s within %s: state %s, end %q, node %s", id, what, within, sb.State, sb.EndReason, sb.Node)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// account makes an account of its own for a scenario and a full key of it
// (with a daily limit when limit > 0), so that its listing and usage hold
// only the scenario's sandboxes.
func (r *rig) account(name string, concurrency int, limit int64) string {
	r.t.Helper()
	a := r.apis[0]
	name = name + "-" + r.tag
	status, data := r.do(a, r.key, "POST", "/v1/accounts", api.CreateAccountRequest{Name: name, Concurrency: concurrency})
	if status != 201 {
		r.t.Fatalf("creating account %s: %d %s", name, status, data)
	}
	var acct api.Account
	json.Unmarshal(data, &acct)
	status, data = r.do(a, r.key, "POST", "/v1/keys", api.CreateKeyRequest{Account: acct.ID, DailyLimitMicros: limit})
	if status != 201 {
		r.t.Fatalf("creating a key of %s: %d %s", name, status, data)
	}
	var k api.Key
	json.Unmarshal(data, &k)
	return k.Secret
}

func (r *rig) usage(a *apiServer, key string) api.Usage {
	r.t.Helper()
	status, data := r.do(a, key, "GET", "/v1/usage", nil)
	if status != 200 {
		r.t.Fatalf("usage through %s: %d %s", a.name, status, data)
	}
	var u api.Usage
	json.Unmarshal(data, &u)
	return u
}
