package httpapi

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// cutReader returns its data, then err.
type cutReader struct {
	r   io.Reader
	err error
}

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		return n, c.err
	}
	return n, err
}

func (c *cutReader) Close() error { return nil }

func TestExecGuard(t *testing.T) {
	leaseEnded := sandbox.Errorf(sandbox.KindLeaseEnded, "lease over")
	tests := []struct {
		name, stream string
		err          error
		wantLast     string // "" means the stream is passed as it is
	}{
		{"complete stream", "{\"type\":\"start\"}\n{\"type\":\"exit\",\"exit_code\":0}\n", io.EOF, ""},
		{"ends with an error event", "{\"type\":\"start\"}\n{\"type\":\"error\"}\n", io.EOF, ""},
		{"cut between lines", "{\"type\":\"start\"}\n{\"type\":\"stdout\",\"data\":\"x\"}\n", io.ErrUnexpectedEOF, "lease_ended"},
		{"cut inside a line", "{\"type\":\"start\"}\n{\"type\":\"stdo", io.ErrUnexpectedEOF, "lease_ended"},
		{"clean end without exit", "{\"type\":\"start\"}\n", io.EOF, "lease_ended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &execGuard{body: &cutReader{strings.NewReader(tt.stream), tt.err}, reason: func(error) error { return leaseEnded }}
			// Small reads, as a network would deliver them.
			var out strings.Builder
			buf := make([]byte, 7)
			for {
				n, err := g.Read(buf)
				out.WriteString(string(buf[:n]))
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("got error %v, want the stream to end cleanly", err)
					}
					break
				}
			}
			if tt.wantLast == "" {
				if out.String() != tt.stream {
					t.Fatalf("got %q, want the stream unchanged", out.String())
				}
				return
			}
			var lines []string
			sc := bufio.NewScanner(strings.NewReader(out.String()))
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			last := lines[len(lines)-1]
			if !strings.Contains(last, `"type":"error"`) || !strings.Contains(last, tt.wantLast) {
				t.Fatalf("last line %q, want an error event with %s (whole: %q)", last, tt.wantLast, out.String())
			}
			if !strings.HasPrefix(out.String(), tt.stream) {
				t.Fatalf("the original stream was changed: %q", out.String())
			}
		})
	}
}

// endless is a line without end, as a fake agent would send.
type endless struct{ closed bool }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func (e *endless) Close() error { e.closed = true; return nil }

// TestExecGuardBoundsALine: what passes the guard of an endless line is
// bounded, ends with an error event, and the agent's stream is closed.
func TestExecGuardBoundsALine(t *testing.T) {
	body := &endless{}
	g := &execGuard{body: body, reason: func(error) error { return nil }}
	out, err := io.ReadAll(io.LimitReader(g, 8*maxExecLine))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > maxExecLine+512<<10 { // one read past the bound at most
		t.Fatalf("passed %d bytes of one line, want at most about %d", len(out), maxExecLine)
	}
	if !body.closed {
		t.Fatal("the agent's stream was left open")
	}
	last := out[strings.LastIndexByte(string(out[:len(out)-1]), '\n')+1:]
	if !strings.Contains(string(last), `"type":"error"`) || !strings.Contains(string(last), "internal") {
		t.Fatalf("last line %q, want an internal error event", last)
	}
}
