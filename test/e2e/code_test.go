package e2e

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// TestCodeInterpreter runs cells in real kernels of one gVisor sandbox,
// through the server and the Go client: state, results, plots, pip, a
// timeout, contexts, a restart and a kernel that dies.
func TestCodeInterpreter(t *testing.T) {
	s := testenv.StartServer(t)
	c := newClient(t, s, s.Key)
	ctx := t.Context()
	// Set before the default context is made: its kernel gets the
	// secret's placeholder, never the value.
	const secretValue = "sk-code-e2e-5f1c9a7d3b"
	if _, err := c.SetSecret(ctx, "WR_CODE_SECRET", "api.example.org", secretValue); err != nil {
		t.Fatal(err)
	}
	sb := mustCreate(t, c, api.CreateSandboxRequest{VCPUs: 1, MemoryMiB: 1024, TimeoutSeconds: 1800})

	run := func(t *testing.T, req api.CodeRequest) *client.Execution {
		t.Helper()
		ex, err := c.RunCode(ctx, sb.ID, req, client.CodeOptions{})
		if err != nil {
			t.Fatalf("running %q: %v", req.Code, err)
		}
		return ex
	}
	// value runs code and returns its result's text, failing on an
	// exception.
	value := func(t *testing.T, cid, code string) string {
		t.Helper()
		ex := run(t, api.CodeRequest{Code: code, ContextID: cid})
		if ex.Error != nil {
			t.Fatalf("running %q: %s: %s\n%s", code, ex.Error.Name, ex.Error.Value, ex.Error.Traceback)
		}
		return ex.Text()
	}
	// exception runs code and returns the exception it ended with (a zero
	// one for none).
	exception := func(t *testing.T, cid, code string) *api.CodeException {
		t.Helper()
		ex := run(t, api.CodeRequest{Code: code, ContextID: cid})
		if ex.Error == nil {
			return &api.CodeException{}
		}
		return ex.Error
	}

	t.Run("state across calls, the last expression, output", func(t *testing.T) {
		var streamed []string
		ex, err := c.RunCode(ctx, sb.ID, api.CodeRequest{Code: "x = 40\nprint('hello')\nx", Env: map[string]string{"WR_FIRST": "first-env"}},
			client.CodeOptions{Stdout: func(s string) { streamed = append(streamed, s) }})
		if err != nil {
			t.Fatal(err)
		}
		if ex.Error != nil || ex.Text() != "40" || strings.Join(ex.Stdout, "") != "hello\n" || strings.Join(streamed, "") != "hello\n" {
			t.Fatalf("first cell: got %+v (streamed %q), want 40 and hello", ex, streamed)
		}
		if got := value(t, "", "x + 2"); got != "42" {
			t.Errorf("x + 2 in the next call: got %q, want 42", got)
		}
		if got := value(t, "", "import os; os.environ['WR_FIRST']"); got != "'first-env'" {
			t.Errorf("env of the call that made the default context: got %s, want 'first-env'", got)
		}
		if got := value(t, "", "os.environ.get('WR_CODE_SECRET', '')"); got == "''" || strings.Contains(got, secretValue) {
			t.Errorf("the account's secret in the kernel: got %s, want its placeholder", got)
		}
		if got := value(t, "", "x = 7"); got != "" {
			t.Errorf("an assignment as the last line: got result %q, want none", got)
		}
		e := exception(t, "", "1/0")
		if e.Name != "ZeroDivisionError" || !strings.Contains(e.Traceback, "ZeroDivisionError") || strings.Contains(e.Traceback, "\x1b[") {
			t.Errorf("1/0: got %+v, want ZeroDivisionError with a plain-text traceback", e)
		}
		ex = run(t, api.CodeRequest{Code: "import sys; print('err', file=sys.stderr)"})
		if strings.Join(ex.Stderr, "") != "err\n" {
			t.Errorf("stderr: got %q, want err", ex.Stderr)
		}
		l, err := c.ListContexts(ctx, sb.ID)
		if err != nil || !slices.ContainsFunc(l, func(cc api.CodeContext) bool { return cc.ID == "default" && cc.Cwd == "/workspace" }) {
			t.Errorf("contexts: got %+v %v, want the default one in /workspace", l, err)
		}
	})

	t.Run("display, pandas and a matplotlib PNG", func(t *testing.T) {
		ex := run(t, api.CodeRequest{Code: "from IPython.display import display, HTML\ndisplay(HTML('<b>shown</b>'))\n" +
			"import pandas as pd\npd.DataFrame({'a': [1, 2]})"})
		if ex.Error != nil || len(ex.Results) != 2 {
			t.Fatalf("got %+v, want a display and a value", ex)
		}
		if r := ex.Results[0]; r.HTML != "<b>shown</b>" || r.IsMainResult {
			t.Errorf("display: got %+v, want the HTML, not the main result", r)
		}
		if r := ex.Results[1]; !r.IsMainResult || !strings.Contains(r.HTML, "<table") || !strings.Contains(r.Text, "a") {
			t.Errorf("DataFrame: got %+v, want the main result with an HTML table", r)
		}
		ex = run(t, api.CodeRequest{Code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"})
		if ex.Error != nil {
			t.Fatalf("plot: %s: %s", ex.Error.Name, ex.Error.Value)
		}
		var png []byte
		for _, r := range ex.Results {
			if r.PNG != "" {
				b, err := base64.StdEncoding.DecodeString(r.PNG)
				if err != nil {
					t.Fatalf("png is not base64: %v", err)
				}
				png = b
			}
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
			t.Fatalf("plot: got %d bytes starting %q, want a PNG", len(png), png[:min(len(png), 8)])
		}
	})

	t.Run("pip installs a wheel uploaded into the sandbox", func(t *testing.T) {
		const path = "/workspace/wrdemo-0.1-py3-none-any.whl"
		if _, err := c.WriteFile(ctx, sb.ID, path, bytes.NewReader(demoWheel(t)), 0o644); err != nil {
			t.Fatal(err)
		}
		ex := run(t, api.CodeRequest{Code: "!pip install " + path, TimeoutMs: 300_000})
		out := strings.Join(ex.Stdout, "") + strings.Join(ex.Stderr, "")
		if ex.Error != nil || !strings.Contains(out, "Successfully installed wrdemo-0.1") {
			t.Fatalf("pip: got error %+v, output %q", ex.Error, out)
		}
		ex = run(t, api.CodeRequest{Code: "import wrdemo\nwrdemo.hello()"})
		if ex.Error != nil || ex.Text() != "'hello from a wheel'" {
			// Where pip put it, and where the kernel looks.
			where := value(t, "", "import site, sys\n(site.getusersitepackages(), sys.path)")
			t.Errorf("the installed package in the same kernel: got %q %+v, want 'hello from a wheel' (user site, sys.path: %s)", ex.Text(), ex.Error, where)
		}
	})

	t.Run("a timeout interrupts the cell and keeps the state", func(t *testing.T) {
		ex := run(t, api.CodeRequest{Code: "y = 'kept'\nwhile True: pass", TimeoutMs: 2000})
		if ex.Error == nil || ex.Error.Name != "TimeoutError" || !strings.Contains(ex.Error.Value, "timeout_ms=2000") {
			t.Fatalf("got %+v, want a TimeoutError naming timeout_ms=2000", ex.Error)
		}
		if got := value(t, "", "y, x"); got != "('kept', 7)" {
			t.Errorf("after the timeout: got %s, want ('kept', 7)", got)
		}
	})

	var other *api.CodeContext
	t.Run("two contexts are isolated", func(t *testing.T) {
		if _, err := c.MakeDir(ctx, sb.ID, "/workspace/sub"); err != nil {
			t.Fatal(err)
		}
		var err error
		other, err = c.CreateContext(ctx, sb.ID, api.CreateContextRequest{Cwd: "sub", Env: map[string]string{"WR_CTX": "ctx-env"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(other.ID, "ctx_") || other.Cwd != "/workspace/sub" || other.Language != "python" {
			t.Fatalf("new context: got %+v", other)
		}
		if got := value(t, other.ID, "import os\nz = 'other'\n(os.getcwd(), os.environ['WR_CTX'])"); got != "('/workspace/sub', 'ctx-env')" {
			t.Errorf("cwd and env of the new context: got %s", got)
		}
		if e := exception(t, other.ID, "x"); e.Name != "NameError" {
			t.Errorf("the default context's x in the other: got %+v, want NameError", e)
		}
		if e := exception(t, "default", "z"); e.Name != "NameError" {
			t.Errorf("the other context's z in the default: got %+v, want NameError", e)
		}
		l, err := c.ListContexts(ctx, sb.ID)
		if err != nil || len(l) != 2 {
			t.Errorf("contexts: got %+v %v, want default and %s", l, err, other.ID)
		}
	})
	if other == nil {
		t.Fatal("no second context: the rest needs one")
	}

	t.Run("a restart loses the state", func(t *testing.T) {
		rc, err := c.RestartContext(ctx, sb.ID, other.ID)
		if err != nil || rc.ID != other.ID || rc.Cwd != other.Cwd {
			t.Fatalf("restart: got %+v %v", rc, err)
		}
		if e := exception(t, other.ID, "z"); e.Name != "NameError" {
			t.Errorf("z after the restart: got %+v, want NameError", e)
		}
		if got := value(t, other.ID, "import os; os.environ.get('WR_CTX')"); got != "'ctx-env'" {
			t.Errorf("env after the restart: got %s, want 'ctx-env'", got)
		}
		if got := value(t, "", "x"); got != "7" {
			t.Errorf("the default context after the other's restart: got %s, want 7", got)
		}
	})

	t.Run("a kernel that dies is reported and replaced", func(t *testing.T) {
		e := exception(t, other.ID, "import os; os._exit(1)")
		if e.Name != "DeadKernelError" {
			t.Fatalf("os._exit: got %+v, want DeadKernelError", e)
		}
		if got := value(t, other.ID, "1 + 1"); got != "2" {
			t.Errorf("the context after its kernel died: got %s, want 2", got)
		}
	})

	t.Run("unknown and removed contexts are not found", func(t *testing.T) {
		if err := c.RemoveContext(ctx, sb.ID, other.ID); err != nil {
			t.Fatal(err)
		}
		for _, cid := range []string{other.ID, "ctx_0000000000000000"} {
			_, err := c.RunCode(ctx, sb.ID, api.CodeRequest{Code: "1", ContextID: cid}, client.CodeOptions{})
			if !errors.Is(err, client.ErrNotFound) {
				t.Errorf("a cell in %s: got %v, want not_found", cid, err)
			}
			if _, err := c.RestartContext(ctx, sb.ID, cid); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("restarting %s: got %v, want not_found", cid, err)
			}
		}
		if got := value(t, "", "x"); got != "7" {
			t.Errorf("the default context after another was removed: got %s, want 7", got)
		}
	})

	t.Run("bad input is refused", func(t *testing.T) {
		base := "/v1/sandboxes/" + sb.ID
		for _, tt := range []struct{ method, path, body string }{
			{"POST", base + "/code", `{"context_id":"default"}`},
			{"POST", base + "/code", `{"code":"1","language":"ruby"}`},
			{"POST", base + "/code", `{"code":"1","timeout_ms":-5}`},
			{"POST", base + "/code", `{"code":"1","context_id":"nope"}`},
			{"POST", base + "/contexts", `{"language":"ruby"}`},
			{"POST", base + "/contexts", `{"cwd":"does/not/exist"}`},
			{"POST", base + "/contexts/nope/restart", ``},
		} {
			var st int
			var body []byte
			if tt.body != "" {
				st, body = call(t, s, s.Key, tt.method, tt.path, strings.NewReader(tt.body))
			} else {
				st, body = call(t, s, s.Key, tt.method, tt.path, nil)
			}
			if st != http.StatusBadRequest || errorCode(body) != "invalid_request" {
				t.Errorf("%s %s %s: got %d %s, want 400 invalid_request", tt.method, tt.path, tt.body, st, body)
			}
		}
	})

	t.Run("a read-only key runs no code", func(t *testing.T) {
		ro := newKey(t, s, `{"kind":"read_only"}`)
		base := "/v1/sandboxes/" + sb.ID
		for _, tt := range []struct{ method, path, body string }{
			{"POST", base + "/code", `{"code":"x = 0"}`},
			{"POST", base + "/contexts", `{}`},
			{"POST", base + "/contexts/default/restart", ``},
			{"DELETE", base + "/contexts/default", ``},
		} {
			var st int
			var body []byte
			if tt.body != "" {
				st, body = call(t, s, ro.Secret, tt.method, tt.path, strings.NewReader(tt.body))
			} else {
				st, body = call(t, s, ro.Secret, tt.method, tt.path, nil)
			}
			if st != http.StatusForbidden || errorCode(body) != "forbidden" {
				t.Errorf("%s %s with a read-only key: got %d %s, want 403 forbidden", tt.method, tt.path, st, body)
			}
		}
		if st, body := call(t, s, ro.Secret, "GET", base+"/contexts", nil); st != http.StatusOK {
			t.Errorf("GET contexts with a read-only key: got %d %s, want 200", st, body)
		}
		if got := value(t, "", "x"); got != "7" {
			t.Errorf("x after the read-only key's tries: got %s, want 7", got)
		}
	})

	// Last: it ends the sandbox.
	t.Run("a sandbox stopped under a cell ends its stream with an error event", func(t *testing.T) {
		started := make(chan struct{})
		var once sync.Once
		done := make(chan error, 1)
		go func() {
			_, err := c.RunCode(ctx, sb.ID, api.CodeRequest{Code: "import time\nprint('started', flush=True)\ntime.sleep(600)"},
				client.CodeOptions{Stdout: func(string) { once.Do(func() { close(started) }) }})
			done <- err
		}()
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("the cell ended before it was stopped: %v", err)
		}
		if _, err := c.StopSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		err := <-done
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Code != "conflict" || !strings.Contains(ae.Message, "cell") {
			t.Fatalf("got %T %v, want a conflict error event naming the cell", err, err)
		}
	})
}

// demoWheel is a pure-Python wheel of package wrdemo, made by hand: a
// zip with the package, its metadata and a RECORD of their hashes.
func demoWheel(t *testing.T) []byte {
	t.Helper()
	const info = "wrdemo-0.1.dist-info/"
	files := []struct{ name, body string }{
		{"wrdemo/__init__.py", "def hello():\n    return 'hello from a wheel'\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: wrdemo\nVersion: 0.1\nSummary: a wheel the e2e tests build\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: withruntime-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(info + "RECORD,,\n")
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
