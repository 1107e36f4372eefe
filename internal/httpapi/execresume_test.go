package httpapi

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestStreamGuardFollowsOn: an exec stream cut under its command (inside a
// line, as a suspend of the link cuts it) is followed on from the bytes
// of each stream the client read: the follow's start event is dropped,
// the cut line is never passed on, and the client reads one stream with
// one exit. When the follow cannot be opened (the sandbox was paused),
// the client reads the break's error event, as before.
func TestStreamGuardFollowsOn(t *testing.T) {
	first := "{\"type\":\"start\",\"pid\":7}\n{\"type\":\"stdout\",\"data\":\"ab\"}\n{\"type\":\"stderr\",\"data_b64\":\"/w==\"}\n{\"type\":\"stdout\",\"da"
	then := "{\"type\":\"start\",\"pid\":7}\n{\"type\":\"stdout\",\"data\":\"de\"}\n{\"type\":\"exit\",\"exit_code\":0}\n"
	read := func(g *streamGuard) string {
		t.Helper()
		var out strings.Builder
		buf := make([]byte, 5)
		for {
			n, err := g.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("got error %v, want the stream to end cleanly", err)
				}
				return out.String()
			}
		}
	}
	var asked []execProgress
	g := &streamGuard{kind: execStream, body: &cutReader{strings.NewReader(first), io.ErrUnexpectedEOF},
		reason:   func(error) error { return sandbox.Errorf(sandbox.KindConflict, "paused") },
		progress: &execProgress{}, followOn: func(p *execProgress) (io.ReadCloser, error) {
			asked = append(asked, *p)
			if len(asked) > 1 {
				return nil, errors.New("no more")
			}
			p.skipStart = true
			return io.NopCloser(strings.NewReader(then)), nil
		}}
	got := read(g)
	want := first[:strings.LastIndexByte(first, '\n')+1] + then[strings.IndexByte(then, '\n')+1:]
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if len(asked) != 1 || asked[0].pid != 7 || asked[0].stdout != 2 || asked[0].stderr != 1 {
		t.Fatalf("followed on with %+v, want pid 7 from stdout 2, stderr 1", asked)
	}

	// A follow that cannot be opened: the break's error, once.
	g = &streamGuard{kind: execStream, body: &cutReader{strings.NewReader(first), io.ErrUnexpectedEOF},
		reason:   func(error) error { return sandbox.Errorf(sandbox.KindConflict, "sandbox is paused") },
		progress: &execProgress{}, followOn: func(*execProgress) (io.ReadCloser, error) { return nil, errors.New("paused") }}
	got = read(g)
	if !strings.HasSuffix(got, "\"type\":\"error\",\"error\":{\"code\":\"conflict\",\"message\":\"sandbox is paused\"}}\n") || strings.Count(got, "\"type\":\"error\"") != 1 {
		t.Fatalf("got %q, want the whole lines, then one conflict error event", got)
	}
}
