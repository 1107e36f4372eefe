package cli

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func TestParseUSD(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string // substring; "" for no error
	}{
		{"2", 2_000_000, ""},
		{"2.5", 2_500_000, ""},
		{"0.000001", 1, ""},
		{"1.000001", 1_000_001, ""},
		{"0.1", 100_000, ""},    // not 99_999 as float64 arithmetic could give
		{"4.35", 4_350_000, ""}, // 4.35*1e6 is 4349999.999... in floating point
		{"1234567.891011", 1_234_567_891_011, ""},
		{".5", 500_000, ""},
		{"007", 7_000_000, ""},
		{"0", 0, ""},
		{"9223372036854.775807", math.MaxInt64, ""},
		{"9223372036854.775808", 0, "too large"},
		{"99999999999999999999", 0, "too large"},
		{"1.0000001", 0, "at most 6 decimal places"},
		{"-1", 0, "non-negative"},
		{"+1", 0, "non-negative"},
		{"1e3", 0, "non-negative"},
		{"$1", 0, "non-negative"},
		{"1.", 0, "digits after the decimal point"},
		{"1.2.3", 0, "non-negative"},
		{"", 0, "want an amount"},
		{".", 0, "want an amount"},
		{" 1", 0, "non-negative"},
	}
	for _, tt := range tests {
		got, err := parseUSD(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parseUSD(%q): got %d, %v; want %d", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseUSD(%q): got %d, %v; want an error with %q", tt.in, got, err, tt.err)
		}
	}
}

func TestFormatUSD(t *testing.T) {
	tests := map[int64]string{
		0: "0.000000", 1: "0.000001", 31_250: "0.031250", 80_000: "0.080000", 1_000_000: "1.000000",
		1_234_567_891: "1234.567891", -1: "-0.000001", -2_500_000: "-2.500000",
		math.MaxInt64: "9223372036854.775807", math.MinInt64: "-9223372036854.775808",
	}
	for in, want := range tests {
		if got := formatUSD(in); got != want {
			t.Errorf("formatUSD(%d): got %q, want %q", in, got, want)
		}
	}
}

// fields returns the lines of out with their whitespace collapsed.
func fields(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return lines
}

func TestAccountsCommands(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)

	code, stdout, stderr := run(t, nil, "accounts", "create", "team", "--concurrency", "5", "--trial-hours", "2.5")
	if code != 0 || stdout != "acc_new\n" {
		t.Fatalf("create: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = run(t, nil, "accounts", "create", "--json", "other")
	var acc api.Account
	if err := json.Unmarshal([]byte(stdout), &acc); err != nil || code != 0 || acc.ID != "acc_new" || acc.Name != "other" {
		t.Errorf("create --json: exit %d, %v, %q", code, err, stdout)
	}
	f.mu.Lock()
	got := f.accountsCreated
	f.mu.Unlock()
	want := []api.CreateAccountRequest{{Name: "team", Concurrency: 5, TrialHours: 2.5}, {Name: "other"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests: got %+v, want %+v", got, want)
	}
	if code, _, stderr := run(t, nil, "accounts", "create", "taken"); code != 1 || stderr != "error: conflict: account taken exists\n" {
		t.Errorf("create taken: exit %d stderr %q", code, stderr)
	}

	code, stdout, stderr = run(t, nil, "accounts", "ls")
	wantLines := []string{
		"ID NAME CONCURRENCY TRIAL-HOURS USED-HOURS",
		"acc_1 default 100 - -",
		"acc_2 trial-1 5 50 1.23",
	}
	if code != 0 || !reflect.DeepEqual(fields(stdout), wantLines) {
		t.Errorf("ls: exit %d stderr %q\ngot  %q\nwant %q", code, stderr, fields(stdout), wantLines)
	}
	code, stdout, _ = run(t, nil, "accounts", "ls", "--json")
	var l api.AccountList
	if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 0 || len(l.Accounts) != 2 {
		t.Errorf("ls --json: exit %d, %v, %q", code, err, stdout)
	}
}

func TestKeysCommands(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)

	code, stdout, stderr := run(t, nil, "keys", "create")
	if code != 0 || stdout != "wr_secret_new\n" || stderr != "" {
		t.Fatalf("create: exit %d stdout %q stderr %q, want the secret alone", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, nil, "keys", "create", "--account", "team", "--read-only", "--daily-limit-usd", "4.35", "--name", "ci", "--json")
	if code != 0 {
		t.Fatalf("create --json: exit %d: %s", code, stderr)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(stdout), &obj); err != nil || obj["key"] != "wr_secret_new" || obj["id"] != "key_new" {
		t.Errorf("create --json: want an object whose \"key\" is the secret, got %q (%v)", stdout, err)
	}
	// --format e2b asks for it; --format withruntime (the default) asks
	// for nothing, so that a server from before formats takes it.
	for _, format := range []string{"e2b", "withruntime"} {
		if code, _, stderr := run(t, nil, "keys", "create", "--read-only", "--format", format); code != 0 {
			t.Fatalf("create --format %s: exit %d: %s", format, code, stderr)
		}
	}
	code, _, stderr = run(t, nil, "keys", "create", "--format", "E2B")
	if code != 2 || !strings.Contains(stderr, `--format must be withruntime or e2b, not "E2B"`) {
		t.Errorf("create --format E2B: exit %d stderr %q, want a usage error", code, stderr)
	}
	f.mu.Lock()
	got := f.keysCreated
	f.mu.Unlock()
	want := []api.CreateKeyRequest{
		{Kind: "full"},
		{Account: "team", Kind: "read_only", Name: "ci", DailyLimitMicros: 4_350_000},
		{Kind: "read_only", Format: "e2b"},
		{Kind: "read_only"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests:\ngot  %+v\nwant %+v", got, want)
	}

	code, stdout, stderr = run(t, nil, "keys", "ls", "--account", "team")
	c := created.Local().Format(time.RFC3339)
	wantLines := []string{
		"ID ACCOUNT KIND NAME DAILY-LIMIT-USD PARENT CREATED",
		"key_1 acc_1 admin - - - " + c,
		"key_2 acc_1 read_only ci 2.500000 key_1 " + c,
	}
	if code != 0 || !reflect.DeepEqual(fields(stdout), wantLines) {
		t.Errorf("ls: exit %d stderr %q\ngot  %q\nwant %q", code, stderr, fields(stdout), wantLines)
	}
	code, stdout, _ = run(t, nil, "keys", "ls", "--json")
	var kl api.KeyList
	if err := json.Unmarshal([]byte(stdout), &kl); err != nil || code != 0 || len(kl.Keys) != 2 {
		t.Errorf("ls --json: exit %d, %v, %q", code, err, stdout)
	}
	if strings.Contains(stdout, `"key"`) {
		t.Errorf("ls --json shows a secret: %q", stdout)
	}

	code, stdout, stderr = run(t, nil, "keys", "rm", "key_1", "key_zz", "key_2")
	if code != 1 || stdout != "key_1\nkey_2\n" || stderr != "error: not_found: no key key_zz\n" {
		t.Errorf("rm: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	f.mu.Lock()
	deleted, queries := f.keysDeleted, f.queries
	f.mu.Unlock()
	if !reflect.DeepEqual(deleted, []string{"key_1", "key_2"}) {
		t.Errorf("deleted: got %v", deleted)
	}
	if !reflect.DeepEqual(queries, []string{"/v1/keys?account=team", "/v1/keys?"}) {
		t.Errorf("list queries: got %q", queries)
	}
}

func TestUsageCommand(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	code, stdout, stderr := run(t, nil, "usage", "--account", "team", "--key", "key_2", "--from", "2030-01-01", "--to", "2030-01-31")
	wantLines := []string{
		"DAY ACCOUNT KEY SANDBOX-HOURS CPU-HOURS COST-USD",
		"2030-01-01 acc_1 key_1 1.5000 0.2500 0.046875",
		"2030-01-02 acc_1 key_2 0.5000 1.0000 0.040000",
		"TOTAL 2.0000 1.2500 0.086875",
	}
	if code != 0 || !reflect.DeepEqual(fields(stdout), wantLines) {
		t.Errorf("usage: exit %d stderr %q\ngot  %q\nwant %q", code, stderr, fields(stdout), wantLines)
	}
	code, stdout, _ = run(t, nil, "usage", "--json")
	var u api.Usage
	if err := json.Unmarshal([]byte(stdout), &u); err != nil || code != 0 || u.CostMicros != 86_875 || len(u.Rows) != 2 {
		t.Errorf("usage --json: exit %d, %v, %q", code, err, stdout)
	}
	f.mu.Lock()
	queries := f.queries
	f.mu.Unlock()
	want := []string{"/v1/usage?account=team&from=2030-01-01&key=key_2&to=2030-01-31", "/v1/usage?"}
	if !reflect.DeepEqual(queries, want) {
		t.Errorf("queries: got %q, want %q", queries, want)
	}
}

func TestAccountsUsageErrors(t *testing.T) {
	f := newFakeServer(t)
	useServer(t, f.URL)
	tests := []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"accounts"}, 2, "no command given"},
		{[]string{"accounts", "explode"}, 2, `unknown command "accounts explode"`},
		{[]string{"accounts", "create"}, 2, "want one account NAME"},
		{[]string{"accounts", "create", "a", "b"}, 2, "want one account NAME"},
		{[]string{"accounts", "create", "a", "--concurrency", "-1"}, 2, "must not be negative"},
		{[]string{"accounts", "create", "a", "--trial-hours", "-1"}, 2, "must not be negative"},
		{[]string{"accounts", "ls", "x"}, 2, `unexpected argument "x"`},
		{[]string{"keys"}, 2, "no command given"},
		{[]string{"keys", "create", "x"}, 2, `unexpected argument "x"`},
		{[]string{"keys", "create", "--daily-limit-usd", "1.0000001"}, 2, "at most 6 decimal places"},
		{[]string{"keys", "create", "--daily-limit-usd", "-3"}, 2, "non-negative"},
		{[]string{"keys", "create", "--daily-limit-usd", "0"}, 2, "must be positive"},
		{[]string{"keys", "rm"}, 2, "want at least one key ID"},
		{[]string{"usage", "--from", "yesterday"}, 2, "want a day as YYYY-MM-DD"},
		{[]string{"usage", "--from", "2030-02-01", "--to", "2030-01-01"}, 2, "is after --to"},
		{[]string{"usage", "x"}, 2, `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, nil, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("got exit %d stderr %q, want %d and %q", code, stderr, tt.wantCode, tt.wantStderr)
			}
		})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.accountsCreated)+len(f.keysCreated)+len(f.keysDeleted)+len(f.queries) != 0 {
		t.Errorf("a usage error reached the server")
	}
	for _, args := range [][]string{{"keys", "create", "--help"}, {"accounts", "create", "--help"}, {"usage", "--help"}} {
		if code, stdout, _ := run(t, nil, args...); code != 0 || !strings.HasPrefix(stdout, "usage: withruntime "+args[0]) {
			t.Errorf("%v: exit %d stdout %q", args, code, stdout)
		}
	}
}
