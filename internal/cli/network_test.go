package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/withruntime/withruntime/api"
)

// netServer is an API with one sandbox, sbx_n, whose network policy,
// exec output and the requests made of it the tests set and read.
type netServer struct {
	*httptest.Server
	mu      sync.Mutex
	policy  api.Network
	puts    []api.Network
	gets    int
	stderr  []string // what an exec writes to stderr, event by event
	exit    int
	stopped bool
	egress  []api.EgressEvent
}

func newNetServer(t *testing.T) *netServer {
	t.Helper()
	n := &netServer{}
	sandbox := func() api.Sandbox {
		return api.Sandbox{ID: "sbx_n", State: "running", VCPUs: 2, MemoryMiB: 4096, LeaseEndsAt: lease, Network: n.policy}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/sbx_n/network", func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.gets++
		writeJSON(w, 200, n.policy)
	})
	mux.HandleFunc("PUT /v1/sandboxes/sbx_n/network", func(w http.ResponseWriter, r *http.Request) {
		var p api.Network
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			writeJSON(w, 400, api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_request", Message: err.Error()}})
			return
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		n.puts = append(n.puts, p)
		n.policy = p
		writeJSON(w, 200, sandbox())
	})
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateSandboxRequest
		json.NewDecoder(r.Body).Decode(&req)
		n.mu.Lock()
		defer n.mu.Unlock()
		if req.Network != nil {
			n.policy = *req.Network
		}
		writeJSON(w, 201, sandbox())
	})
	mux.HandleFunc("DELETE /v1/sandboxes/sbx_n", func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.stopped = true
		s := sandbox()
		s.State = "ended"
		writeJSON(w, 200, s)
	})
	mux.HandleFunc("GET /v1/sandboxes/sbx_n/egress", func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		defer n.mu.Unlock()
		writeJSON(w, 200, api.EgressLog{Events: append([]api.EgressEvent{}, n.egress...)})
	})
	mux.HandleFunc("POST /v1/sandboxes/sbx_n/exec", func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		events := []api.ExecEvent{{Type: "start", Pid: 1}}
		for _, s := range n.stderr {
			events = append(events, api.ExecEvent{Type: "stderr", Data: s})
		}
		events = append(events, api.ExecEvent{Type: "exit", ExitCode: intp(n.exit)})
		n.mu.Unlock()
		streamEvents(w, events...)
	})
	n.Server = httptest.NewServer(mux)
	t.Cleanup(n.Close)
	useServer(t, n.URL)
	return n
}

func TestSandboxNetwork(t *testing.T) {
	only := api.Network{Internet: true, Allow: []string{"pypi.example.test", "*.example.org"}}
	tests := []struct {
		name     string
		before   api.Network
		args     []string
		wantCode int
		wantPut  *api.Network // nil: no change asked
		wantOut  string       // stdout, or part of stderr when wantCode is 2
	}{
		{"show off", api.Network{}, []string{"sbx_n"}, 0, nil, "off\n"},
		{"show allow list", only, []string{"sbx_n"}, 0, nil, "internet, only pypi.example.test *.example.org\n"},
		{"show as JSON", only, []string{"--json", "sbx_n"}, 0, nil, "{\n  \"internet\": true,\n  \"allow\": [\n    \"pypi.example.test\",\n    \"*.example.org\"\n  ]\n}\n"},
		{"internet", api.Network{}, []string{"sbx_n", "--internet"}, 0, &api.Network{Internet: true}, "internet\n"},
		{"allow", api.Network{}, []string{"sbx_n", "--allow", "pypi.example.test", "--allow", "*.example.org"}, 0, &only,
			"internet, only pypi.example.test *.example.org\n"},
		{"internet and allow", api.Network{}, []string{"--internet", "--allow", "pypi.example.test", "sbx_n"}, 0,
			&api.Network{Internet: true, Allow: []string{"pypi.example.test"}}, "internet, only pypi.example.test\n"},
		{"off", only, []string{"sbx_n", "--off"}, 0, &api.Network{}, "off\n"},
		{"off as JSON", only, []string{"sbx_n", "--off", "--json"}, 0, &api.Network{}, "{\n  \"internet\": false\n}\n"},
		{"off with internet", api.Network{}, []string{"sbx_n", "--off", "--internet"}, 2, nil, "--off cannot go with --internet or --allow"},
		{"off with allow", api.Network{}, []string{"sbx_n", "--off", "--allow", "a.example"}, 2, nil, "--off cannot go with --internet or --allow"},
		{"empty allow", api.Network{}, []string{"sbx_n", "--allow", ""}, 2, nil, "must not be empty"},
		{"no id", api.Network{}, []string{"--internet"}, 2, nil, "want one sandbox ID, got 0"},
		{"two ids", api.Network{}, []string{"sbx_n", "sbx_m"}, 2, nil, "want one sandbox ID, got 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNetServer(t)
			n.policy = tt.before
			code, stdout, stderr := run(t, nil, append([]string{"sandbox", "network"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("got exit %d (stdout %q stderr %q), want %d", code, stdout, stderr, tt.wantCode)
			}
			if code == 2 {
				if !strings.Contains(stderr, tt.wantOut) || !strings.Contains(stderr, "usage: withruntime sandbox network") {
					t.Errorf("got stderr %q, want %q and the usage line", stderr, tt.wantOut)
				}
			} else if stdout != tt.wantOut {
				t.Errorf("got stdout %q, want %q", stdout, tt.wantOut)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			switch {
			case tt.wantPut == nil && len(n.puts) != 0:
				t.Errorf("got PUT %+v, want no change", n.puts)
			case tt.wantPut != nil && (len(n.puts) != 1 || !reflect.DeepEqual(n.puts[0], *tt.wantPut)):
				t.Errorf("got PUTs %+v, want one of %+v", n.puts, *tt.wantPut)
			}
		})
	}
}

// TestNetworkOffHint: exec and run say once that the network is off when
// the command failed with a network error on stderr (split across writes
// too) and the sandbox's network is off, and never otherwise.
func TestNetworkOffHint(t *testing.T) {
	resolve := []string{"curl: (6) Could not re", "solve host: pypi.example.test\n"}
	execHint := "withruntime: the sandbox's network is off; turn it on with: withruntime sandbox network sbx_n --internet (or --allow HOST)\n"
	runHint := "withruntime: the sandbox's network is off; run it with --internet (or --allow HOST)\n"
	tests := []struct {
		name     string
		args     []string
		policy   api.Network
		stderr   []string
		exit     int
		wantHint string // "": none
		wantGet  bool   // the policy is read
	}{
		{"exec, DNS failure, off", []string{"sandbox", "exec", "sbx_n", "--", "curl", "https://pypi.example.test"}, api.Network{}, resolve, 6, execHint, true},
		{"exec as JSON", []string{"sandbox", "exec", "--json", "sbx_n", "--", "curl", "x"}, api.Network{}, resolve, 6, execHint, true},
		{"exec, Python", []string{"sandbox", "exec", "sbx_n", "--", "pip", "install", "x"}, api.Network{},
			[]string{"socket.gaierror: [Errno -3] Temporary failure in name resolution\n"}, 1, execHint, true},
		{"run", []string{"sandbox", "run", "--", "curl", "x"}, api.Network{}, resolve, 6, runHint, true},
		{"exit 0", []string{"sandbox", "exec", "sbx_n", "--", "curl", "x"}, api.Network{}, resolve, 0, "", false},
		{"internet on", []string{"sandbox", "exec", "sbx_n", "--", "curl", "x"}, api.Network{Internet: true}, resolve, 6, "", true},
		{"other failure", []string{"sandbox", "exec", "sbx_n", "--", "false"}, api.Network{}, []string{"no such file\n"}, 1, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNetServer(t)
			n.policy, n.stderr, n.exit = tt.policy, tt.stderr, tt.exit
			code, _, stderr := run(t, nil, tt.args...)
			if code != tt.exit {
				t.Errorf("got exit %d, want the command's %d", code, tt.exit)
			}
			hints := strings.Count(stderr, "withruntime: the sandbox's network is off")
			switch {
			case tt.wantHint == "" && hints != 0:
				t.Errorf("got stderr %q, want no hint", stderr)
			case tt.wantHint != "" && (hints != 1 || !strings.HasSuffix(stderr, tt.wantHint)):
				t.Errorf("got stderr %q, want it to end with the hint once: %q", stderr, tt.wantHint)
			}
			// Streamed, the command's stderr passes through unchanged
			// (with --json it is in the JSON on stdout).
			if want := strings.Join(tt.stderr, ""); !slices.Contains(tt.args, "--json") && !strings.HasPrefix(stderr, want) {
				t.Errorf("got stderr %q, want the command's %q first, unchanged", stderr, want)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if (n.gets > 0) != tt.wantGet {
				t.Errorf("read the policy %d times, want a read: %v", n.gets, tt.wantGet)
			}
		})
	}
}

func TestNetWatch(t *testing.T) {
	for _, tt := range []struct {
		writes []string
		want   bool
	}{
		{[]string{"fatal: unable to access 'https://x/': Could not resolve host: x\n"}, true},
		{[]string{"Error: getaddrinfo EAI_AGAIN registry.example.test\n"}, true},
		{[]string{"Temporary failure resol", "ving 'deb.example.test'\n"}, true},
		{[]string{"dial tcp: lookup proxy.example.test on 10.0.0.1:53: read udp: i/o timeout\n"}, true},
		{[]string{"NETWORK IS UNREACHABLE"}, true},
		{[]string{"Traceback (most recent call last):\n", "ZeroDivisionError: division by zero\n"}, false},
		{[]string{strings.Repeat("x", 10000), "could not", " resolve"}, true},
		{[]string{"could not", strings.Repeat("x", 100), " resolve"}, false},
	} {
		w := &netWatch{}
		for _, s := range tt.writes {
			w.Write([]byte(s))
		}
		if w.failed() != tt.want {
			t.Errorf("%q: got failed %v, want %v", tt.writes, w.failed(), tt.want)
		}
	}
}

// TestEmptyEgressNote: an empty egress log of a sandbox whose network is
// off says why on stderr; a log with events, or a sandbox with internet,
// gets no note.
func TestEmptyEgressNote(t *testing.T) {
	note := "withruntime: the sandbox's network is off: the host drops all it sends before the egress proxy, so nothing is logged; turn it on with: withruntime sandbox network sbx_n --internet (or --allow HOST)\n"
	ev := api.EgressEvent{Time: lease, Kind: "dns", Name: "x.example.test", Port: 53, Verdict: "refused", Reason: "internet off"}
	for _, tt := range []struct {
		name     string
		policy   api.Network
		events   []api.EgressEvent
		json     bool
		wantNote bool
	}{
		{"off, empty", api.Network{}, nil, false, true},
		{"off, empty, JSON", api.Network{}, nil, true, true},
		{"off, an event", api.Network{}, []api.EgressEvent{ev}, false, false},
		{"internet, empty", api.Network{Internet: true}, nil, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newNetServer(t)
			n.policy, n.egress = tt.policy, tt.events
			args := []string{"sandbox", "egress", "sbx_n"}
			if tt.json {
				args = append(args, "--json")
			}
			code, stdout, stderr := run(t, nil, args...)
			if code != 0 {
				t.Fatalf("got exit %d (stderr %q)", code, stderr)
			}
			if want := map[bool]string{true: note, false: ""}[tt.wantNote]; stderr != want {
				t.Errorf("got stderr %q, want %q", stderr, want)
			}
			if tt.json && stdout != "{\n  \"events\": []\n}\n" {
				t.Errorf("got stdout %q, want the empty log as JSON, unchanged", stdout)
			}
		})
	}
}
