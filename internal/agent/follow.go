package agent

import (
	"context"
	"net/http"

	"github.com/withruntime/withruntime/api"
)

// followChunk bounds the output one event of a follow stream carries, as
// pump bounds an exec stream's.
const followChunk = 32 << 10

// handleProcessStream follows a background process: a "start" event with
// its pid, its output from ?stdout_offset= and ?stderr_offset= (byte
// offsets into each stream; 0, the default, is the oldest byte still kept),
// as it is kept and then as it is produced, then one "exit" event when it
// has ended. Leaving (or stalling) ends the stream, never the process: this
// is how a client reattaches, and with the offsets of the bytes it already
// has, resumes without a gap or a repeat while the output is kept.
func (s *Server) handleProcessStream(w http.ResponseWriter, r *http.Request) error {
	offs := make([]int64, 2)
	for i, name := range []string{"stdout_offset", "stderr_offset"} {
		n, err := queryInt(r, name)
		if err != nil {
			return err
		}
		offs[i] = n
	}
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	es := newEventStream(w, cancel)
	defer es.end()
	es.begin(p.pid)
	streams := []struct {
		t   *tail
		typ string
	}{{p.stdout, api.EventStdout}, {p.stderr, api.EventStderr}}
	for {
		rung := p.bell.wait()
		// Whether it had ended is looked at before the output: all of it is
		// kept by then, so what is read next is the rest.
		var ended bool
		select {
		case <-p.done:
			ended = true
		default:
		}
		sent := false
		for i, st := range streams {
			b, next := st.t.from(offs[i], followChunk)
			offs[i] = next
			if len(b) > 0 {
				es.send(api.OutputEvent(st.typ, b))
				sent = true
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case sent:
			continue
		case ended:
			info := p.info()
			ev := api.ExecEvent{Type: api.EventExit, ExitCode: info.ExitCode, TimedOut: info.TimedOut}
			if info.EndedAt != nil {
				ev.DurationMs = info.EndedAt.Sub(info.StartedAt).Milliseconds()
			}
			es.send(ev)
			return nil
		}
		select {
		case <-rung:
		case <-ctx.Done():
			return nil
		case <-s.suspend.wait():
			// The link is going: the host follows again from its offsets.
			return nil
		}
	}
}
