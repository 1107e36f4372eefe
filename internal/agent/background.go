package agent

import (
	"errors"
	"net/http"
	"time"

	"github.com/withruntime/withruntime/api"
)

// startBackground starts l detached from the request and keeps it in the
// process table. A command that cannot start answers 201 all the same,
// with a Process that has already ended (pid 0, exit code 127 or 126, the
// reason on stderr); having no pid, it is not kept in the table.
func (s *Server) startBackground(w http.ResponseWriter, l *launch) error {
	stdout, stderr := newTail(api.OutputCap), newTail(api.OutputCap)
	p, err := s.start(l, nil, stdout.write, stderr.write)
	var nr *notRunnable
	if errors.As(err, &nr) {
		now := time.Now().UTC()
		code := nr.code
		ended := api.Process{
			Cmd:       l.cmd,
			ExitCode:  &code,
			StartedAt: now,
			EndedAt:   &now,
		}
		ended.SetOutput("", nr.msg)
		writeJSON(w, http.StatusCreated, ended)
		return nil
	}
	if err != nil {
		return err
	}
	p.stdout, p.stderr = stdout, stderr
	s.procs.add(p)
	writeJSON(w, http.StatusCreated, p.info())
	return nil
}
