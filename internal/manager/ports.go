package manager

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// portUpgrade is the agent's protocol name of a port connection
// (internal/agent's PortUpgrade; the agent's package is not imported here).
const portUpgrade = "withruntime-tcp"

// portAnswerWait bounds how long the agent takes to answer a port
// connection's request: it dials loopback, which answers at once.
const portAnswerWait = 15 * time.Second

// DialPort returns a TCP connection to port on a running sandbox's
// loopback, made by its agent over a connection of its own (never one of
// the agent transport's, whose bound is for the API's calls). A sandbox
// that ended is not found; a paused one is a conflict, unless it resumes
// on use (wake): then it is resumed first.
func (m *Manager) DialPort(ctx context.Context, account, id string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, sandbox.Errorf(sandbox.KindInvalid, "port must be 1 to 65535, not %d", port)
	}
	if err := m.serving(); err != nil {
		return nil, err
	}
	m.pools.busy()
	rec, err := m.get(ctx, account, id)
	if err == nil && wakes(rec) {
		rec, err = m.resume(ctx, account, id, true)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case rec.State == sandbox.StateEnded:
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox %s has ended (%s)", id, rec.EndReason)
	case rec.State != sandbox.StateRunning:
		return nil, sandbox.Errorf(sandbox.KindConflict, "sandbox %s is %s: resume it to reach its port %d", id, rec.State, port)
	case !m.ownsRecord(rec):
		return nil, elsewhere(rec, "reach a port of")
	}
	m.mu.Lock()
	e := m.live[id]
	var inst sandbox.Instance
	if e != nil {
		inst = e.inst
	}
	m.mu.Unlock()
	if inst == nil {
		return nil, stateError(rec, "reach a port of")
	}
	conn, err := inst.DialAgent(ctx)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.KindConflict, "the agent of sandbox %s cannot be reached: %v", id, err)
	}
	if err := upgradePort(ctx, conn, port); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// upgradePort asks the agent on conn to join it to port, and reads its
// answer (bounded: the agent is the sandbox's to replace).
func upgradePort(ctx context.Context, conn net.Conn, port int) error {
	deadline := time.Now().Add(portAnswerWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := "GET /ports/" + strconv.Itoa(port) + "/connect HTTP/1.1\r\nHost: sandbox-agent\r\nConnection: Upgrade\r\nUpgrade: " + portUpgrade + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return sandbox.Errorf(sandbox.KindConflict, "the sandbox's agent did not take the request: %v", err)
	}
	// One byte at a time: nothing of the stream that follows the answer
	// may be read into a buffer that is then dropped.
	br := bufio.NewReaderSize(&byteReader{conn}, 16)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return sandbox.Errorf(sandbox.KindConflict, "the sandbox's agent did not answer: %v", err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols && resp.Header.Get("Upgrade") == portUpgrade {
		if !stop() {
			return ctx.Err()
		}
		_ = conn.SetDeadline(time.Time{})
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code, Message string }
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	msg := body.Error.Message
	if msg == "" {
		msg = fmt.Sprintf("the agent answered %s", resp.Status)
	}
	kind := sandbox.Kind(body.Error.Code)
	if !slices.Contains([]sandbox.Kind{sandbox.KindInvalid, sandbox.KindConflict, sandbox.KindBadGateway}, kind) {
		kind = sandbox.KindBadGateway
	}
	return sandbox.Errorf(kind, "%s", msg)
}

// byteReader reads one byte per call, so that a bufio.Reader over it
// never holds bytes past the answer's blank line: those are the port's.
type byteReader struct{ r io.Reader }

func (b *byteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return b.r.Read(p)
}
