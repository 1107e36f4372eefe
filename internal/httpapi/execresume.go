package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// An exec stream that breaks while its sandbox goes on running (a
// snapshot suspends the agent's link for a moment) is followed on: the
// agent hands a foreground command whose link is suspended over to its
// process table, and the guard opens that process's follow stream from
// the bytes of each output stream the client has had, so the client reads
// one stream, with no gap and no repeat while the agent keeps the output
// (api.OutputCap a stream). A sandbox paused or ended under the command
// ends the stream with the break's error, as before.

// resumeWait bounds how long a broken exec stream waits for its sandbox's
// agent to answer again: a snapshot's freeze lasts well under it.
const resumeWait = 10 * time.Second

// maxResumes bounds how many times one exec stream is followed on.
const maxResumes = 3

// execProgress is what an exec stream's guard knows of its command: its
// pid and how many bytes of each output stream the client was given.
type execProgress struct {
	pid     int
	stdout  int64
	stderr  int64
	resumes int
	// skipStart drops the next start event: a follow stream's, which the
	// client must not read twice.
	skipStart bool
}

// see counts an event line the client is about to read, and reports
// whether it should read it.
func (p *execProgress) see(line []byte) bool {
	var ev api.ExecEvent
	if json.Unmarshal(line, &ev) != nil {
		return true
	}
	switch ev.Type {
	case api.EventStart:
		if p.skipStart {
			p.skipStart = false
			return false
		}
		p.pid = ev.Pid
	case api.EventStdout, api.EventStderr:
		out, err := ev.Output()
		if err != nil {
			return true
		}
		if ev.Type == api.EventStdout {
			p.stdout += int64(len(out))
		} else {
			p.stderr += int64(len(out))
		}
	}
	return true
}

// followOn opens, for the exec stream of sandbox id, the follow stream of
// its command pid from the offsets given, once the sandbox's agent
// answers again; an error when the sandbox is not running (paused, ended)
// or the command is not in its process table (it did not outlive the
// break).
func (s *server) followOn(ctx context.Context, c caller, id string, p *execProgress) (io.ReadCloser, error) {
	if p.pid <= 0 || p.resumes >= maxResumes {
		return nil, errors.New("nothing to follow")
	}
	deadline := time.Now().Add(resumeWait)
	for {
		body, retry, err := s.followOnce(ctx, c, id, p)
		if err == nil {
			p.resumes++
			p.skipStart = true
			return body, nil
		}
		if !retry || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// followOnce is one try of followOn: retry says whether another may do
// better (the link is not back yet).
func (s *server) followOnce(ctx context.Context, c caller, id string, p *execProgress) (io.ReadCloser, bool, error) {
	// A paused sandbox is not woken by this (Agent would, under
	// auto_resume): only a running one is followed on.
	rec, err := s.cfg.Sandboxes.Get(ctx, c.account, id)
	if err != nil {
		return nil, false, err
	}
	if rec.State != sandbox.StateRunning {
		return nil, false, fmt.Errorf("sandbox %s is %s", id, rec.State)
	}
	transport, err := s.cfg.Sandboxes.Agent(ctx, c.account, id)
	if err != nil {
		return nil, true, err
	}
	q := url.Values{"stdout_offset": {strconv.FormatInt(p.stdout, 10)}, "stderr_offset": {strconv.FormatInt(p.stderr, 10)}}
	u := &url.URL{Scheme: "http", Host: agentHost, Path: "/processes/" + strconv.Itoa(p.pid) + "/stream", RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := transport.RoundTrip(req)
	if err != nil {
		return nil, true, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mt != "application/x-ndjson" {
		resp.Body.Close()
		return nil, false, fmt.Errorf("the agent answered the follow of pid %d with %s", p.pid, resp.Status)
	}
	return resp.Body, false, nil
}
