package client

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// rawLines answers with body as it is: the wire format, not what package
// api would write.
func rawLines(contentType, body string, status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestExecOutputIsExactBytes(t *testing.T) {
	bin := "\xff\xfeok\n"
	b64 := base64.StdEncoding.EncodeToString([]byte(bin))
	stream := `{"type":"start","pid":3}
{"type":"stdout","data":"text \u2603 "}
{"type":"stdout","data_b64":"` + b64 + `"}
{"type":"stderr","data_b64":"` + base64.StdEncoding.EncodeToString([]byte("\x80")) + `"}
{"type":"exit","exit_code":0}
`
	c := newTestClient(t, rawLines("application/x-ndjson", stream, 200))
	req := api.ExecRequest{Cmd: api.Command{Shell: "x"}}

	var out, errw bytes.Buffer
	if _, err := c.Exec(t.Context(), "s", req, ExecOptions{Stdout: &out, Stderr: &errw}); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "text \u2603 "+bin; got != want {
		t.Errorf("writer got stdout %q, want %q", got, want)
	}
	if got, want := errw.String(), "\x80"; got != want {
		t.Errorf("writer got stderr %q, want %q", got, want)
	}

	res, err := c.Exec(t.Context(), "s", req, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "text \u2603 "+bin || res.Stderr != "\x80" {
		t.Errorf("got result stdout %q stderr %q, want the exact bytes", res.Stdout, res.Stderr)
	}
}

func TestExecBrokenBase64IsTransportError(t *testing.T) {
	stream := `{"type":"start","pid":3}
{"type":"stdout","data_b64":"not base64!"}
{"type":"exit","exit_code":0}
`
	c := newTestClient(t, rawLines("application/x-ndjson", stream, 200))
	_, err := c.Exec(t.Context(), "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}}, ExecOptions{})
	var te *TransportError
	if !errors.As(err, &te) {
		t.Errorf("got %v, want a *TransportError", err)
	}
}

func TestProcessOutputIsExactBytes(t *testing.T) {
	bin := "\xff\xfeok\n"
	proc := `{"pid":42,"cmd":"x","running":false,"exit_code":0,"started_at":"2026-01-01T00:00:00Z",` +
		`"stdout":"\ufffdok\n","stderr":"plain","stdout_b64":"` + base64.StdEncoding.EncodeToString([]byte(bin)) + `"}`
	mux := http.NewServeMux()
	mux.Handle("POST /v1/sandboxes/{id}/exec", rawLines("application/json", proc, 201))
	mux.Handle("GET /v1/sandboxes/{id}/processes/{pid}", rawLines("application/json", proc, 200))
	mux.Handle("POST /v1/sandboxes/{id}/processes/{pid}/kill", rawLines("application/json", proc, 200))
	mux.Handle("GET /v1/sandboxes/{id}/processes", rawLines("application/json", `{"processes":[`+proc+`]}`, 200))
	c := newTestClient(t, mux)
	ctx := t.Context()
	check := func(what string, p *api.Process, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if p.Stdout != bin || p.Stderr != "plain" {
			t.Errorf("%s: got stdout %q stderr %q, want %q %q", what, p.Stdout, p.Stderr, bin, "plain")
		}
	}
	p, err := c.StartProcess(ctx, "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}})
	check("start", p, err)
	p, err = c.GetProcess(ctx, "s", 42)
	check("get", p, err)
	p, err = c.WaitProcess(ctx, "s", 42)
	check("wait", p, err)
	p, err = c.KillProcess(ctx, "s", 42)
	check("kill", p, err)
	l, err := c.ListProcesses(ctx, "s")
	if err != nil || len(l) != 1 {
		t.Fatalf("list: got %v, %v", l, err)
	}
	check("list", &l[0], nil)
}
