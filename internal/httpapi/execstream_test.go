package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
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

func TestStreamGuard(t *testing.T) {
	leaseEnded := sandbox.Errorf(sandbox.KindLeaseEnded, "lease over")
	// A result line longer than an exec line may be, as a plot makes.
	bigResult := "{\"type\":\"result\",\"result\":{\"png\":\"" + strings.Repeat("A", 1<<20) + "\"}}\n"
	tests := []struct {
		name, stream string
		kind         streamKind
		err          error
		wantLast     string // "" means the stream is passed as it is
	}{
		{"complete stream", "{\"type\":\"start\"}\n{\"type\":\"exit\",\"exit_code\":0}\n", execStream, io.EOF, ""},
		{"ends with an error event", "{\"type\":\"start\"}\n{\"type\":\"error\"}\n", execStream, io.EOF, ""},
		{"cut between lines", "{\"type\":\"start\"}\n{\"type\":\"stdout\",\"data\":\"x\"}\n", execStream, io.ErrUnexpectedEOF, "lease_ended"},
		{"cut inside a line", "{\"type\":\"start\"}\n{\"type\":\"stdo", execStream, io.ErrUnexpectedEOF, "lease_ended"},
		{"clean end without exit", "{\"type\":\"start\"}\n", execStream, io.EOF, "lease_ended"},
		{"exec stream ending with a code end", "{\"type\":\"start\"}\n{\"type\":\"end\"}\n", execStream, io.EOF, "lease_ended"},
		{"complete cell", "{\"type\":\"stdout\",\"text\":\"x\"}\n" + bigResult + "{\"type\":\"end\",\"execution_count\":2}\n", codeStream, io.EOF, ""},
		{"cell ending with an error event", "{\"type\":\"error\",\"error\":{\"code\":\"internal\"}}\n", codeStream, io.EOF, ""},
		{"cell cut after a result", "{\"type\":\"stdout\",\"text\":\"x\"}\n" + bigResult, codeStream, io.EOF, "lease_ended"},
		{"cell cut inside a result", bigResult[:len(bigResult)/2], codeStream, io.ErrUnexpectedEOF, "lease_ended"},
		{"code stream ending with an exec exit", "{\"type\":\"exit\",\"exit_code\":0}\n", codeStream, io.EOF, "lease_ended"},
		// The connection breaks after the terminal event: the stream is
		// whole, and a second terminal event would break the contract.
		{"reset after the exit", "{\"type\":\"start\"}\n{\"type\":\"exit\",\"exit_code\":0}\n", execStream, io.ErrUnexpectedEOF, ""},
		{"reset after the end", "{\"type\":\"end\",\"execution_count\":1}\n", codeStream, io.ErrUnexpectedEOF, ""},
		{"a line that is not an event", "{\"type\":\"start\"}\nnot json\n{\"type\":\"exit\",\"exit_code\":0}\n", execStream, io.EOF, "internal"},
		{"a line that is not an object", "{\"type\":\"start\"}\n[1]\n", execStream, io.EOF, "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &streamGuard{kind: tt.kind, body: &cutReader{strings.NewReader(tt.stream), tt.err}, reason: func(error) error { return leaseEnded }}
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
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			if !strings.Contains(last, `"type":"error"`) || !strings.Contains(last, tt.wantLast) {
				t.Fatalf("last line %.200q, want an error event with %s", last, tt.wantLast)
			}
			if n := strings.Count(out.String(), `"type":"error"`); n != 1 {
				t.Fatalf("got %d error events, want 1", n)
			}
			// Whole lines pass; a cut one never does, so the error event
			// is a line of its own a client can parse.
			whole := tt.stream[:strings.LastIndexByte(tt.stream, '\n')+1]
			if tt.wantLast == "internal" {
				whole = tt.stream[:strings.IndexByte(tt.stream, '\n')+1]
			}
			if out.String() != whole+last+"\n" {
				t.Fatalf("got %.200q, want the whole lines of %.200q, then the error event", out.String(), tt.stream)
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

// TestStreamGuardBoundsALine: an endless line is cut at the stream kind's
// bound, the agent's stream is closed and the client reads an error event.
func TestStreamGuardBoundsALine(t *testing.T) {
	for _, k := range []streamKind{execStream, codeStream} {
		t.Run(k.what, func(t *testing.T) {
			body := &endless{}
			g := &streamGuard{kind: k, body: body, reason: func(error) error { return nil }}
			out, err := io.ReadAll(io.LimitReader(g, int64(8*k.maxLine)))
			if err != nil {
				t.Fatal(err)
			}
			if !body.closed {
				t.Fatal("the agent's stream was left open")
			}
			// Nothing of the line passes: the client reads the error
			// event alone, as a line it can parse.
			var ev api.ExecEvent
			if err := json.Unmarshal(out, &ev); err != nil || ev.Type != api.EventError || ev.Error == nil || ev.Error.Code != "internal" || strings.Count(string(out), "\n") != 1 {
				t.Fatalf("got %.300q, want one internal error event line", out)
			}
		})
	}
}
