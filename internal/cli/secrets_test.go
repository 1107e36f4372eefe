package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

// secretValue is what the tests store; it must never be printed.
const secretValue = "sk-cli-5e1d9a0b7c3f4286"

// secretRoutes serves the secrets of one account and the egress log of
// sbx_a, checking names and hosts roughly as the server does.
func (f *fakeServer) secretRoutes(mux *http.ServeMux) {
	mux.HandleFunc("PUT /v1/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req api.SetSecretRequest
		json.Unmarshal(body, &req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.secretBodies = append(f.secretBodies, string(body))
		if strings.Contains(req.Host, ":") {
			writeJSON(w, 400, api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_request", Message: "host must be a name without a port"}})
			return
		}
		f.secretValues = append(f.secretValues, req.Value)
		if f.secrets == nil {
			f.secrets = map[string]api.SecretInfo{}
		}
		info := api.SecretInfo{Name: r.PathValue("name"), Host: strings.ToLower(req.Host), UpdatedAt: created}
		f.secrets[info.Name] = info
		writeJSON(w, 200, info)
	})
	mux.HandleFunc("GET /v1/secrets", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		l := api.SecretList{Secrets: []api.SecretInfo{}}
		for _, name := range slices.Sorted(maps.Keys(f.secrets)) {
			l.Secrets = append(l.Secrets, f.secrets[name])
		}
		writeJSON(w, 200, l)
	})
	mux.HandleFunc("DELETE /v1/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		name := r.PathValue("name")
		if _, ok := f.secrets[name]; !ok {
			writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "secret " + name + " not found"}})
			return
		}
		delete(f.secrets, name)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/egress", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.PathValue("id") != "sbx_a" {
			writeJSON(w, 404, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "no sandbox " + r.PathValue("id")}})
			return
		}
		writeJSON(w, 200, api.EgressLog{Events: f.egress})
	})
}

// runStdin runs the command line with stdin and returns its exit code and
// output.
func runStdin(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	code = (&App{}).Main(args, stdin, &out, &errw)
	return code, out.String(), errw.String()
}

func TestSecretsCommands(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	var printed strings.Builder // all output, searched for the value at the end
	runS := func(stdin io.Reader, args ...string) (int, string, string) {
		t.Helper()
		code, stdout, stderr := runStdin(t, stdin, args...)
		printed.WriteString(stdout + stderr)
		return code, stdout, stderr
	}

	code, stdout, stderr := runS(strings.NewReader(secretValue), "secrets", "set", "OPENAI_API_KEY", "--host", "api.openai.com")
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("set: exit %d stdout %q stderr %q, want 0 and no output", code, stdout, stderr)
	}
	// The value goes as given: a space at either end stays.
	code, stdout, _ = runS(strings.NewReader(" "+secretValue+"\t"), "secrets", "set", "--json", "--host", "*.Example.org", "GH_TOKEN")
	var info api.SecretInfo
	if err := json.Unmarshal([]byte(stdout), &info); err != nil || code != 0 || info.Name != "GH_TOKEN" || info.Host != "*.example.org" {
		t.Errorf("set --json: exit %d, %v, %q", code, err, stdout)
	}
	// From a file too.
	path := filepath.Join(t.TempDir(), "value")
	os.WriteFile(path, []byte(secretValue), 0o600)
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if code, _, stderr := runS(file, "secrets", "set", "FROM_FILE", "--host", "a.example"); code != 0 {
		t.Errorf("set from a file: exit %d stderr %q", code, stderr)
	}
	f.mu.Lock()
	values := slices.Clone(f.secretValues)
	f.mu.Unlock()
	if want := []string{secretValue, " " + secretValue + "\t", secretValue}; !reflect.DeepEqual(values, want) {
		t.Errorf("values sent: got %q, want %q", values, want)
	}

	// The server's refusal is printed; the value is not.
	code, _, stderr = runS(strings.NewReader(secretValue), "secrets", "set", "K", "--host", "api.openai.com:443")
	if code != 1 || stderr != "error: invalid_request: host must be a name without a port\n" {
		t.Errorf("set refused: exit %d stderr %q", code, stderr)
	}

	code, stdout, stderr = runS(nil, "secrets", "ls")
	wantLines := []string{
		"NAME HOST UPDATED",
		"FROM_FILE a.example " + created.Local().Format(time.RFC3339),
		"GH_TOKEN *.example.org " + created.Local().Format(time.RFC3339),
		"OPENAI_API_KEY api.openai.com " + created.Local().Format(time.RFC3339),
	}
	if code != 0 || !reflect.DeepEqual(fields(stdout), wantLines) {
		t.Errorf("ls: exit %d stderr %q\ngot  %q\nwant %q", code, stderr, fields(stdout), wantLines)
	}
	code, stdout, _ = runS(nil, "secrets", "ls", "--json")
	var l api.SecretList
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 0 || len(l.Secrets) != 3 {
		t.Errorf("ls --json: exit %d, %v, %q", code, err, stdout)
	}

	code, stdout, stderr = runS(nil, "secrets", "rm", "GH_TOKEN", "NOPE", "FROM_FILE")
	if code != 1 || stdout != "GH_TOKEN\nFROM_FILE\n" || stderr != "error: not_found: secret NOPE not found\n" {
		t.Errorf("rm: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runS(nil, "secrets", "ls", "--json")
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 0 || len(l.Secrets) != 1 {
		t.Errorf("ls after rm: exit %d, %v, %q", code, err, stdout)
	}

	if strings.Contains(printed.String(), secretValue) {
		t.Errorf("the value was printed:\n%s", printed.String())
	}
}

func TestSecretsSetRefused(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	tests := []struct {
		name       string
		stdin      io.Reader
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"empty", strings.NewReader(""), []string{"OPENAI_API_KEY", "--host", "a.example"}, 1, "error: invalid_request: the value on standard input is empty"},
		{"no stdin", nil, []string{"OPENAI_API_KEY", "--host", "a.example"}, 1, "the value on standard input is empty"},
		{"echo's newline", strings.NewReader(secretValue + "\n"), []string{"K", "--host", "a.example"}, 1, "ends with a newline"},
		{"too large", strings.NewReader(strings.Repeat("x", maxSecretBytes+1)), []string{"K", "--host", "a.example"}, 1, "larger than 16384 bytes"},
		{"device", devNull, []string{"K", "--host", "a.example"}, 1, "is a device and not a terminal"},
		{"no host", strings.NewReader(secretValue), []string{"K"}, 2, "--host HOST is required"},
		{"no name", strings.NewReader(secretValue), []string{"--host", "a.example"}, 2, "want one secret NAME, got 0"},
		{"value as name", strings.NewReader(""), []string{secretValue, "--host", "a.example"}, 2, "NAME must be an environment variable name"},
		{"value as second argument", strings.NewReader(""), []string{"K", secretValue, "--host", "a.example"}, 2, "want one secret NAME, got 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runStdin(t, tt.stdin, append([]string{"secrets", "set"}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("got exit %d stderr %q, want %d and %q", code, stderr, tt.wantCode, tt.wantStderr)
			}
			if strings.Contains(stdout+stderr, secretValue) {
				t.Errorf("the value was printed: stdout %q stderr %q", stdout, stderr)
			}
		})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.secretBodies) != 0 {
		t.Errorf("a refused value reached the server: %q", f.secretBodies)
	}
}

func TestSecretsUsageErrors(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	tests := []struct {
		args       []string
		wantStderr string
	}{
		{[]string{"secrets"}, "no command given"},
		{[]string{"secrets", "explode"}, `unknown command "secrets explode"`},
		{[]string{"secrets", "ls", "x"}, `unexpected argument "x"`},
		{[]string{"secrets", "rm"}, "want at least one secret NAME"},
		{[]string{"secrets", "rm", "OK", secretValue}, "argument 2 is not a secret NAME"},
		{[]string{"sandbox", "egress"}, "want one sandbox ID, got 0"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, nil, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("got exit %d stderr %q, want 2 and %q", code, stderr, tt.wantStderr)
			}
			if strings.Contains(stderr, secretValue) {
				t.Errorf("the value was printed: %q", stderr)
			}
		})
	}
	for _, args := range [][]string{{"secrets", "set", "--help"}, {"secrets", "ls", "--help"}, {"secrets", "rm", "--help"}, {"sandbox", "egress", "--help"}} {
		if code, stdout, _ := run(t, nil, args...); code != 0 || !strings.HasPrefix(stdout, "usage: withruntime "+strings.Join(args[:2], " ")) {
			t.Errorf("%v: exit %d stdout %q", args, code, stdout)
		}
	}
	if auth := f.auth(); len(auth) != 0 {
		t.Errorf("a usage error reached the server: %d requests", len(auth))
	}
}

func TestSandboxEgress(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	f.egress = []api.EgressEvent{
		{Time: at, Kind: "dns", Name: "api.example.org", Verdict: "allowed"},
		{Time: at.Add(time.Second), Kind: "tls", Name: "evil.example", Address: "198.18.0.9", Port: 443, Verdict: "refused", Reason: "not in the allow list"},
	}
	code, stdout, stderr := run(t, nil, "sandbox", "egress", "sbx_a")
	ts := func(t time.Time) string { return t.Local().Format("2006-01-02T15:04:05.000Z07:00") }
	want := []string{
		"TIME KIND NAME ADDRESS PORT VERDICT REASON",
		ts(at) + " dns api.example.org - - allowed -",
		ts(at.Add(time.Second)) + " tls evil.example 198.18.0.9 443 refused not in the allow list",
	}
	if code != 0 || !reflect.DeepEqual(fields(stdout), want) {
		t.Errorf("egress: exit %d stderr %q\ngot  %q\nwant %q", code, stderr, fields(stdout), want)
	}
	code, stdout, _ = run(t, nil, "sandbox", "egress", "--json", "sbx_a")
	var log api.EgressLog
	if err := json.Unmarshal([]byte(stdout), &log); err != nil || code != 0 || !reflect.DeepEqual(log.Events, f.egress) {
		t.Errorf("egress --json: exit %d, %v, %q", code, err, stdout)
	}
	f.mu.Lock()
	f.egress = nil
	f.mu.Unlock()
	code, stdout, _ = run(t, nil, "sandbox", "egress", "--json", "sbx_a")
	if code != 0 || !strings.Contains(stdout, `"events": []`) {
		t.Errorf("empty egress --json: exit %d %q, want an empty array", code, stdout)
	}
	if code, _, stderr := run(t, nil, "sandbox", "egress", "sbx_zz"); code != 1 || stderr != "error: not_found: no sandbox sbx_zz\n" {
		t.Errorf("egress of a missing sandbox: exit %d stderr %q", code, stderr)
	}
}
