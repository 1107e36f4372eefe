package agent

import (
	"errors"
	"io"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/withruntime/withruntime/api"
)

// stdinWait bounds how long one write to a process's stdin may block: a
// process that does not read must not hold the request (and its bytes)
// forever.
const stdinWait = 30 * time.Second

// handleProcessStdin writes the body to the stdin of a process started
// with keep_stdin, then with close=true closes it (an empty body just
// closes it).
func (s *Server) handleProcessStdin(w http.ResponseWriter, r *http.Request) error {
	closeIt, err := queryBool(r, "close")
	if err != nil {
		return err
	}
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	if r.ContentLength > api.MaxStdinBody {
		return &http.MaxBytesError{Limit: api.MaxStdinBody}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxStdinBody))
	if err != nil {
		return err
	}
	if err := p.writeStdin(data); err != nil {
		return err
	}
	if closeIt {
		p.closeStdin()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// writeStdin writes b whole to p's stdin, or says why it could not.
func (p *proc) writeStdin(b []byte) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.stdinMu.Lock()
	f := p.stdin
	p.stdinMu.Unlock()
	if f == nil {
		select {
		case <-p.done:
			return conflictf("process %d has ended", p.pid)
		default:
		}
		return conflictf("the stdin of process %d is not open: start it with keep_stdin and do not close it", p.pid)
	}
	if len(b) == 0 {
		return nil
	}
	_ = f.SetWriteDeadline(time.Now().Add(stdinWait))
	n, err := f.Write(b)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return conflictf("process %d did not read its stdin for %s: %d of %d bytes were written", p.pid, stdinWait, n, len(b))
	case errors.Is(err, syscall.EPIPE), errors.Is(err, os.ErrClosed):
		return conflictf("process %d closed its stdin or ended: %d of %d bytes were written", p.pid, n, len(b))
	}
	return err
}

// closeStdin closes p's stdin, if open; a write under way fails.
func (p *proc) closeStdin() {
	p.stdinMu.Lock()
	f := p.stdin
	p.stdin = nil
	p.stdinMu.Unlock()
	if f != nil {
		f.Close()
	}
}

func (p *proc) stdinOpen() bool {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	return p.stdin != nil
}
