package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/cli/localtrusttest"
)

// writeLocalKey puts key in a fresh local data dir, owned by uid.
func writeLocalKey(t *testing.T, key string, uid int) {
	t.Helper()
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	t.Setenv(EnvBaseURL, "")
	t.Setenv(EnvAPIKey, "")
	dir := filepath.Join(data, "withruntime")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "admin.key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// useLocalAddress makes url the address the local key goes to.
func useLocalAddress(t *testing.T, url string) {
	old := localBaseURL
	localBaseURL = url
	t.Cleanup(func() { localBaseURL = old })
}

// Another user listening on the local daemon's address (no daemon runs)
// gets no request carrying the admin key: the client refuses before
// connecting, naming the listener's process and user. A listener of the
// key file's owner still gets the key, and so does any listener when the
// user set the key (the user chose).
func TestLocalKeyOnlyToItsOwnersListener(t *testing.T) {
	tests := []struct {
		name      string
		keyOwner  int
		envKey    string
		wantKeyed []string // the keys the listener saw
		wantErr   []string // in the error; none: the call succeeds
	}{
		{"another user's listener", 0, "", nil,
			[]string{"forbidden: 127.0.0.1:", "is held by process %d (listener) of user nobody (uid 65534)",
				"not by the local daemon of user root (uid 0)", "refusing to send it the local admin key"}},
		{"the key owner's listener", localtrusttest.Nobody, "", []string{"Bearer wr_local"}, nil},
		{"a key the user set", 0, "wr_env", []string{"Bearer wr_env"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := localtrusttest.Start(t, localtrusttest.Nobody)
			writeLocalKey(t, "wr_local", tt.keyOwner)
			t.Setenv(EnvAPIKey, tt.envKey)
			useLocalAddress(t, l.URL)
			c, err := New(WithBaseURL(l.URL))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ListSandboxes(context.Background())
			if tt.wantErr == nil && err != nil {
				t.Errorf("list: got %v, want it to succeed", err)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, ErrForbidden) {
					t.Errorf("list: got %v, want forbidden", err)
				}
				for _, w := range tt.wantErr {
					if w = strings.ReplaceAll(w, "%d", fmt.Sprint(l.Pid)); err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("list: got %v, want it to contain %q", err, w)
					}
				}
			}
			if got := l.Keyed(); fmt.Sprint(got) != fmt.Sprint(tt.wantKeyed) {
				t.Errorf("keys the listener saw: got %q, want %q", got, tt.wantKeyed)
			}
		})
	}
}

func TestCheckLocalListener(t *testing.T) {
	l := localtrusttest.Start(t, localtrusttest.Nobody)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := free.Addr().String()
	free.Close()
	mine, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	tests := []struct {
		name          string
		addr          string
		uid           int
		wantListening bool
		wantForbidden bool
	}{
		{"nothing listens", closed, 0, false, false},
		{"this user's listener", mine.Addr().String(), os.Geteuid(), true, false},
		{"another user's listener", l.Addr, 0, true, true},
		{"that user's own check", l.Addr, localtrusttest.Nobody, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			listening, err := CheckLocalListener(tt.addr, tt.uid)
			if listening != tt.wantListening || errors.Is(err, ErrForbidden) != tt.wantForbidden ||
				(err != nil && !tt.wantForbidden) {
				t.Errorf("got %v, %v; want listening %v, forbidden %v", listening, err, tt.wantListening, tt.wantForbidden)
			}
		})
	}
}

func TestParseListeners(t *testing.T) {
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1 0000000000000000 100 0 0 10 0
   1: 00000000:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 102 1 0000000000000000 100 0 0 10 0
   2: 0200007F:1ECE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 103 1 0000000000000000 100 0 0 10 0
   3: 0100007F:1ECF 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1002        0 104 1 0000000000000000 100 0 0 10 0
   4: 0100007F:1ECE 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1003        0 105 1 0000000000000000 100 0 0 10 0
`
	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1ECE 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  2000        0 201 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1ECE 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  2001        0 202 1 0000000000000000 100 0 0 10 0
   2: 00000000000000000000000001000000:1ECE 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  2002        0 203 1 0000000000000000 100 0 0 10 0
`
	tests := []struct {
		name, table, ip string
		want            []listener
	}{
		{"IPv4: the address and 0.0.0.0, not another address, port or state", tcp, "127.0.0.1",
			[]listener{{0, 101}, {1000, 102}}},
		{"IPv4 target in tcp6: :: and the mapped address", tcp6, "127.0.0.1",
			[]listener{{2000, 201}, {2001, 202}}},
		{"IPv6 target: :: and ::1", tcp6, "::1", []listener{{2000, 201}, {2002, 203}}},
		{"IPv6 target in tcp: none", tcp, "::1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseListeners(strings.NewReader(tt.table), net.ParseIP(tt.ip), 0x1ECE)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}
