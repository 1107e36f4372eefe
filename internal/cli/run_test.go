package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// specCodes is SPEC.md's list of error codes ("Stable names"): the
// server's, then the client-side ones. Nothing else is printed after
// "error: ".
var specCodes = []string{
	"invalid_request", "unauthorized", "forbidden", "not_found", "conflict", "lease_ended",
	"payload_too_large", "not_supported", "max_cost_exceeded", "spending_limit_reached",
	"trial_exhausted", "concurrency_limit_reached", "rate_limited", "capacity_exhausted", "internal",
	"bad_gateway", // nothing answers on a sandbox's port (a preview URL or a port forward)
	"unavailable", "canceled",
}

func TestExecTimeoutExits124AndSaysSo(t *testing.T) {
	tests := []struct {
		args  []string
		after string
	}{
		{[]string{"sandbox", "run", "--exec-timeout", "5s", "--", "sleep", "60"}, "5s"},
		{[]string{"sandbox", "exec", "sbx_a", "--exec-timeout", "5", "--", "sleep", "60"}, "5s"},
		{[]string{"sandbox", "run", "--exec-timeout", "90s", "--json", "--", "sleep", "600"}, "1m30s"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := newFakeServer(t)
			useServer(t, f.URL)
			// What the agent reports for a command its timeout killed:
			// SIGKILL's 137 and timed_out.
			f.events = []api.ExecEvent{{Type: "start", Pid: 1}, {Type: "exit", ExitCode: intp(137), TimedOut: true}}
			code, _, stderr := run(t, nil, tt.args...)
			if code != 124 {
				t.Errorf("exit code: got %d, want 124 (stderr %q)", code, stderr)
			}
			if want := "withruntime: the command was killed by --exec-timeout after " + tt.after + "\n"; stderr != want {
				t.Errorf("stderr: got %q, want %q", stderr, want)
			}
		})
	}
}

func TestExecWithoutTimeoutKeepsTheCode(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	// A command that died of SIGKILL by itself (kill -9 $$) is not a timeout.
	f.events = []api.ExecEvent{{Type: "start", Pid: 1}, {Type: "exit", ExitCode: intp(137)}}
	code, _, stderr := run(t, nil, "sandbox", "run", "--", "sh", "-c", "kill -9 $$")
	if code != 137 || stderr != "" {
		t.Errorf("got exit %d stderr %q, want 137 and nothing", code, stderr)
	}
}

func TestInternetFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want *api.Network
	}{
		{"create off by default", []string{"sandbox", "create"}, nil},
		{"create --internet", []string{"sandbox", "create", "--internet"}, &api.Network{Internet: true}},
		{"run --internet", []string{"sandbox", "run", "--internet", "--", "true"}, &api.Network{Internet: true}},
		{"run --allow", []string{"sandbox", "run", "--allow", "a.example", "--", "true"}, &api.Network{Internet: true, Allow: []string{"a.example"}}},
		{"create --internet --allow", []string{"sandbox", "create", "--internet", "--allow", "a.example", "--allow", "*.b.example"},
			&api.Network{Internet: true, Allow: []string{"a.example", "*.b.example"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			useServer(t, f.URL)
			if code, _, stderr := run(t, nil, tt.args...); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			created, _, _ := f.snapshot()
			if len(created) != 1 || !reflect.DeepEqual(created[0].Network, tt.want) {
				t.Fatalf("network of the create: got %+v, want %+v", created, tt.want)
			}
		})
	}
}

func TestExtendUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "extend", "sbx_a"}, "sandbox extend: no --timeout given\n"},
		{[]string{"sandbox", "extend", "--timeout", "15m"}, "sandbox extend: want one sandbox ID, got 0 arguments\n"},
		{[]string{"sandbox", "extend", "sbx_a", "--timeout", "-3"}, "sandbox extend: invalid argument \"-3\" for \"--timeout\" flag: must be positive\n"},
	}
	for _, tt := range tests {
		code, _, stderr := run(t, nil, tt.args...)
		if code != exitUsage || !strings.HasPrefix(stderr, tt.want) {
			t.Errorf("%v: got exit %d stderr %q, want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	code, stdout, _ := run(t, nil, "sandbox", "extend", "--help")
	if code != 0 || !strings.Contains(stdout, "never shortens") || !strings.Contains(stdout, "--timeout SECONDS") {
		t.Errorf("help: got exit %d %q", code, stdout)
	}
}

// The codes the command line knows are SPEC's, and the client's constants
// are the same list.
func TestKnownCodesAreSPECs(t *testing.T) {
	got := make([]string, 0, len(knownCodes))
	for c := range knownCodes {
		got = append(got, c)
	}
	sort.Strings(got)
	want := append([]string(nil), specCodes...)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("knownCodes: got %v, want %v", got, want)
	}

	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", "client", "errors.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, _ := strconv.Unquote(lit.Value)
			consts = append(consts, s)
		}
		return true
	})
	sort.Strings(consts)
	if !reflect.DeepEqual(consts, want) {
		t.Errorf("client's Code constants: got %v, want %v", consts, want)
	}
}

// Every code the command line's source can print is SPEC's: the literal
// codes given to printError and cliError, and "error: CODE:" in strings.
func TestPrintedCodesAreSPECs(t *testing.T) {
	spec := map[string]bool{}
	for _, c := range specCodes {
		spec[c] = true
	}
	// This package and the binary's main package, which prints serve's
	// errors itself.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	mains, err := filepath.Glob(filepath.Join("..", "..", "cmd", "withruntime", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, mains...)
	inline := regexp.MustCompile(`(?:error|warning): ([a-z_]+):`)
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		check := func(e ast.Expr, what string) {
			lit, ok := e.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return // a constant or a variable: the constants are checked above
			}
			s, _ := strconv.Unquote(lit.Value)
			checked++
			if !spec[s] {
				t.Errorf("%s: %s prints the code %q, not in SPEC's list", fset.Position(lit.Pos()), what, s)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "printError" && len(n.Args) == 3 {
					check(n.Args[1], "printError")
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "cliError" && len(n.Elts) == 2 {
					check(n.Elts[0], "cliError")
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					s, _ := strconv.Unquote(n.Value)
					for _, m := range inline.FindAllStringSubmatch(s, -1) {
						checked++
						if !spec[m[1]] {
							t.Errorf("%s: %q prints the code %q, not in SPEC's list", fset.Position(n.Pos()), s, m[1])
						}
					}
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("found no printed code to check: the walk is broken")
	}
}

// Whatever code an error comes with, the one printed is SPEC's.
func TestErrorCodeOnlyPrintsSPECs(t *testing.T) {
	tests := []struct {
		err      error
		wantCode string
		wantMsg  string
	}{
		{&client.APIError{Code: "not_found", Message: "no sandbox x"}, "not_found", "no sandbox x"},
		{&client.APIError{Code: "teapot", Message: "short and stout"}, "internal", `short and stout (code "teapot")`},
		{&client.TransportError{Op: "GET http://x", Err: os.ErrDeadlineExceeded}, "unavailable", "GET http://x: i/o timeout"},
		{&cliError{"bogus", "from a future edit"}, "internal", `from a future edit (code "bogus")`},
		{os.ErrNotExist, "internal", "file does not exist"},
	}
	for _, tt := range tests {
		code, msg := errorCode(tt.err)
		if code != tt.wantCode || msg != tt.wantMsg {
			t.Errorf("%v: got %q %q, want %q %q", tt.err, code, msg, tt.wantCode, tt.wantMsg)
		}
	}
	var b strings.Builder
	printError(&b, "made_up", "m")
	if got, want := b.String(), "error: internal: m (code \"made_up\")\n"; got != want {
		t.Errorf("printError of an unknown code: got %q, want %q", got, want)
	}
}

// exec sends its standard input without --stdin when it is a pipe or a
// file, as docker exec -i does, and never reads /dev/null or a terminal.
func TestExecForwardsPipedStdin(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { pw.WriteString("echo hi\n"); pw.Close() }()
	defer pr.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, tt := range []struct {
		name string
		in   *os.File
		want string
	}{{"pipe", pr, "echo hi\n"}, {"devnull", null, ""}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			useServer(t, f.URL)
			f.events = []api.ExecEvent{{Type: "start", Pid: 1}, {Type: "exit", ExitCode: intp(0)}}
			var out, errw strings.Builder
			if code := (&App{}).Main([]string{"sandbox", "exec", "sbx_a", "--", "bash"}, tt.in, &out, &errw); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errw.String())
			}
			_, execs, _ := f.snapshot()
			if len(execs) != 1 || execs[0].Stdin != tt.want {
				t.Errorf("execs: got %+v, want stdin %q", execs, tt.want)
			}
		})
	}
}

// -e is --env on exec, run and create; -u/--user picks the exec's user.
func TestShortEnvAndUser(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	f.events = []api.ExecEvent{{Type: "start", Pid: 1}, {Type: "exit", ExitCode: intp(0)}}
	if code, _, stderr := run(t, nil, "sandbox", "exec", "sbx_a", "-e", "X=1", "--user", "root", "--", "id"); code != 0 {
		t.Fatalf("exec: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run(t, nil, "sandbox", "run", "-e", "Y=2", "-u", "root", "--", "id"); code != 0 {
		t.Fatalf("run: exit %d, stderr %q", code, stderr)
	}
	created, execs, _ := f.snapshot()
	if len(execs) != 2 || execs[0].Env["X"] != "1" || execs[0].User != "root" || execs[1].User != "root" {
		t.Errorf("execs: got %+v, want X=1 and user root", execs)
	}
	if len(created) != 1 || created[0].Env["Y"] != "2" {
		t.Errorf("created: got %+v, want Y=2", created)
	}
	code, _, stderr := run(t, nil, "sandbox", "exec", "sbx_a", "--user", "admin", "--", "id")
	if code != 2 || !strings.Contains(stderr, `--user: user must be "user" or "root"`) {
		t.Errorf("--user admin: got exit %d stderr %q, want 2 and the users", code, stderr)
	}
}

// The unauthorized hint names the local daemon's admin key file only when
// the key can have come from it: not with WITHRUNTIME_BASE_URL (another
// server) or WITHRUNTIME_API_KEY set.
func TestUnauthorizedHintNamesTheAdminKeyOnlyForTheDaemon(t *testing.T) {
	t.Setenv(client.EnvBaseURL, "")
	t.Setenv(client.EnvAPIKey, "")
	if got := unauthorizedHint("bad key"); !strings.Contains(got, "admin key is in") {
		t.Errorf("default address: got %q, want the admin key file", got)
	}
	t.Setenv(client.EnvBaseURL, "http://elsewhere:7878")
	if got, want := unauthorizedHint("bad key"), "bad key (set WITHRUNTIME_API_KEY to a key of this server)"; got != want {
		t.Errorf("another server: got %q, want %q", got, want)
	}
	t.Setenv(client.EnvBaseURL, "")
	t.Setenv(client.EnvAPIKey, "k")
	if got := unauthorizedHint("bad key"); strings.Contains(got, "admin key") {
		t.Errorf("user's key: got %q, want no admin key file", got)
	}
}

// A refusal to act on a paused sandbox says how to resume it.
func TestPausedConflictSaysResume(t *testing.T) {
	code, msg := errorCode(&client.APIError{Code: client.CodeConflict, Message: "cannot exec sandbox sbx_a while it is paused"})
	if want := "cannot exec sandbox sbx_a while it is paused (resume it with: withruntime sandbox resume sbx_a)"; code != client.CodeConflict || msg != want {
		t.Errorf("got %s %q, want conflict %q", code, msg, want)
	}
}
