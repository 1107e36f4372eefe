package api

import "fmt"

// PtySize is a terminal's size in character cells.
type PtySize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// The bounds of a terminal. A size outside them is refused (invalid_request).
const (
	MaxPtyCols = 1000
	MaxPtyRows = 1000
	// MaxPtys bounds the terminals running at once in one sandbox: one
	// more is refused (conflict) until one ends.
	MaxPtys = 32
	// PtyOutputKept is how much of a terminal's latest output the agent
	// keeps, replayed to a client that attaches again.
	PtyOutputKept = 64 << 10
	// MaxPtyFrame bounds one message a terminal's WebSocket takes from the
	// client (keystrokes, pasted text or a control message).
	MaxPtyFrame = 64 << 10
)

// Check reports what is wrong with s.
func (s PtySize) Check() error {
	if s.Cols < 1 || s.Cols > MaxPtyCols || s.Rows < 1 || s.Rows > MaxPtyRows {
		return fmt.Errorf("a terminal's size must be 1 to %d columns and 1 to %d rows, not %dx%d", MaxPtyCols, MaxPtyRows, s.Cols, s.Rows)
	}
	return nil
}

// The control messages of a terminal's WebSocket (GET
// /v1/sandboxes/{id}/pty): JSON in text frames, while binary frames carry
// the terminal's bytes both ways.
const (
	// PtyMsgResize, from the client: the terminal's new size.
	PtyMsgResize = "resize"
	// PtyMsgStart, from the server, first: the terminal's id (its pid),
	// to attach again with ?pty_id=.
	PtyMsgStart = "start"
	// PtyMsgExit, from the server, last: the process ended with exit_code;
	// the server closes the connection after it.
	PtyMsgExit = "exit"
	// PtyMsgError, from the server: why the terminal could not start or
	// went away (code and message as in ErrorDetail), then the close.
	PtyMsgError = "error"
)

// PtyMessage is one control message of a terminal's WebSocket.
type PtyMessage struct {
	Type     string `json:"type"`
	Cols     int    `json:"cols,omitempty"`
	Rows     int    `json:"rows,omitempty"`
	PtyID    int    `json:"pty_id,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Code     string `json:"code,omitempty"`
	Message  string `json:"message,omitempty"`
}

// A browser cannot set Authorization on a WebSocket, so a terminal's
// WebSocket also takes its key as a subprotocol: the client offers
// PtySubprotocol and PtyBearerPrefix+KEY (Sec-WebSocket-Protocol:
// withruntime.pty, withruntime.bearer.KEY); the server selects
// PtySubprotocol, never echoing the key. Never put the key in the URL:
// URLs reach access logs and histories.
const (
	PtySubprotocol  = "withruntime.pty"
	PtyBearerPrefix = "withruntime.bearer."
)
