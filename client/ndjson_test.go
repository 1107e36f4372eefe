package client

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/withruntime/withruntime/api"
)

func TestExecLineBound(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		wantErr bool
	}{
		{"under the server's guard", 300 << 10, false},
		{"at the bound", maxExecLine - len(`{"type":"stdout","data":""}`), false},
		{"over the bound", maxExecLine + 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				streamEvents(w, api.ExecEvent{Type: "stdout", Data: strings.Repeat("y", tt.size)}, api.ExecEvent{Type: "exit", ExitCode: intp(0)})
			}))
			res, err := c.Exec(t.Context(), "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}}, ExecOptions{})
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				if len(res.Stdout) != tt.size {
					t.Fatalf("got %d bytes of stdout, want %d", len(res.Stdout), tt.size)
				}
				return
			}
			var te *TransportError
			if !errors.As(err, &te) || !errors.Is(err, errLineTooLong) {
				t.Fatalf("got %T %v, want a *TransportError for a line too long", err, err)
			}
		})
	}
}

// A line that never ends is refused once past the bound: the client does
// not read on to the end of it.
func TestExecEndlessLineRefused(t *testing.T) {
	var sent atomic.Int64
	done := make(chan struct{})
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		w.WriteHeader(200)
		io.WriteString(w, `{"type":"stdout","data":"`)
		chunk := strings.Repeat("z", 1<<20)
		for i := 0; i < 256; i++ {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			sent.Add(1)
		}
	}))
	_, err := c.Exec(t.Context(), "s", api.ExecRequest{Cmd: api.Command{Shell: "x"}}, ExecOptions{})
	if !errors.Is(err, errLineTooLong) {
		t.Fatalf("got %v, want a line too long", err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server still writes 30 s after the client gave up")
	}
	if n := sent.Load(); n >= 128 {
		t.Fatalf("got %d MiB sent, want the client gone long before 256", n)
	}
}

func TestEventDecoder(t *testing.T) {
	type ev struct {
		Type string `json:"type"`
	}
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		wantErr error // after want
	}{
		{"lines", "{\"type\":\"a\"}\n\n  \r\n{\"type\":\"b\"}\r\n", 100, []string{"a", "b"}, io.EOF},
		{"last line without newline", "{\"type\":\"a\"}\n{\"type\":\"b\"}", 100, []string{"a", "b"}, io.EOF},
		{"line of exactly max", "{\"type\":\"abcd\"}\n", len(`{"type":"abcd"}`), []string{"abcd"}, io.EOF},
		{"line of max+1", "{\"type\":\"abcde\"}\n", len(`{"type":"abcd"}`), nil, errLineTooLong},
		{"long line across buffers", "{\"type\":\"" + strings.Repeat("x", 200<<10) + "\"}\n", 1 << 20, []string{strings.Repeat("x", 200<<10)}, io.EOF},
		{"endless line", strings.Repeat("x", 300<<10), 200 << 10, nil, errLineTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newEventDecoder(strings.NewReader(tt.in), tt.max)
			var got []string
			var err error
			for {
				var e ev
				if err = d.Decode(&e); err != nil {
					break
				}
				got = append(got, e.Type)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got events %.80q, want %.80q", got, tt.want)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got error %v, want %v", err, tt.wantErr)
			}
		})
	}
}
