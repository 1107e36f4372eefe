package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// Command is a command given either as an argv list (JSON array) or as a
// shell string (JSON string, run by /bin/sh -c).
type Command struct {
	Argv  []string
	Shell string
}

// MarshalJSON writes the array or the string form.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Argv != nil {
		return json.Marshal(c.Argv)
	}
	return json.Marshal(c.Shell)
}

// UnmarshalJSON reads either form.
func (c *Command) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		c.Shell = ""
		return json.Unmarshal(b, &c.Argv)
	}
	if len(b) > 0 && b[0] == '"' {
		c.Argv = nil
		return json.Unmarshal(b, &c.Shell)
	}
	return errors.New("cmd must be a string or an array of strings")
}

// Empty reports whether the command names nothing to run.
func (c Command) Empty() bool {
	if c.Argv != nil {
		return len(c.Argv) == 0 || c.Argv[0] == ""
	}
	return c.Shell == ""
}

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec (and of the
// agent's POST /exec). Relative cwd is under /workspace; the default cwd is
// /workspace. TimeoutMs 0 means no timeout of its own (the lease bounds it).
// User is UserDefault ("" means it) or UserRoot. KeepStdin, for a
// background process only, keeps its stdin open for POST
// .../processes/{pid}/stdin; it excludes Stdin.
type ExecRequest struct {
	Cmd        Command           `json:"cmd"`
	Cwd        string            `json:"cwd,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Stdin      string            `json:"stdin,omitempty"`
	TimeoutMs  int64             `json:"timeout_ms,omitempty"`
	Background bool              `json:"background,omitempty"`
	User       string            `json:"user,omitempty"`
	KeepStdin  bool              `json:"keep_stdin,omitempty"`
	// Pty runs a background command on a pseudo-terminal of that size
	// (pty.go): its stdin stays open and its output is one stream.
	Pty *PtySize `json:"pty,omitempty"`
}

// The users a command runs as and files are made by: the sandbox user
// (uid 1000, HOME /home/user) or root (uid 0, HOME /root).
const (
	UserDefault = "user"
	UserRoot    = "root"
)

// CheckUser refuses a user other than "", UserDefault and UserRoot.
func CheckUser(u string) error {
	switch u {
	case "", UserDefault, UserRoot:
		return nil
	}
	return errors.New(`user must be "user" or "root"`)
}

// MaxStdinBody bounds one POST .../processes/{pid}/stdin body.
const MaxStdinBody = 1 << 20

// Event types of an exec stream. A foreground exec answers 200 with
// Content-Type application/x-ndjson: one ExecEvent a line, "start" first,
// then "stdout"/"stderr" in the order produced, then exactly one "exit" or
// "error" last.
const (
	EventStart  = "start"
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventExit   = "exit"
	EventError  = "error"
)

// ExecEvent is one line of an exec stream. The output of a "stdout" or
// "stderr" event is in Data when it is valid UTF-8, else in DataB64 (the
// exact bytes, base64): output is bytes, and a JSON string cannot hold
// every byte sequence. Make one with OutputEvent, read it with Output.
type ExecEvent struct {
	Type       string       `json:"type"`
	Pid        int          `json:"pid,omitempty"`
	Data       string       `json:"data,omitempty"`
	DataB64    string       `json:"data_b64,omitempty"`
	ExitCode   *int         `json:"exit_code,omitempty"`
	TimedOut   bool         `json:"timed_out,omitempty"`
	DurationMs int64        `json:"duration_ms,omitempty"`
	Error      *ErrorDetail `json:"error,omitempty"`
}

// OutputEvent is an event of type typ carrying output b.
func OutputEvent(typ string, b []byte) ExecEvent {
	if utf8.Valid(b) {
		return ExecEvent{Type: typ, Data: string(b)}
	}
	return ExecEvent{Type: typ, DataB64: base64.StdEncoding.EncodeToString(b)}
}

// Output is the exact output ev carries.
func (ev ExecEvent) Output() (string, error) {
	if ev.DataB64 == "" {
		return ev.Data, nil
	}
	b, err := base64.StdEncoding.DecodeString(ev.DataB64)
	if err != nil {
		return "", errors.New("data_b64 is not base64")
	}
	return string(b), nil
}

// Process is a background process: POST exec with background=true answers
// 201 with it; GET /v1/sandboxes/{id}/processes/{pid} shows it with its
// output so far (the last OutputCap bytes of each stream; *_truncated says
// older output was dropped). Stdout and Stderr are text: bytes that are
// not UTF-8 show as U+FFFD. When the output is not valid UTF-8,
// StdoutB64/StderrB64 hold its exact bytes too (base64); SetOutput writes
// both forms and ExactOutput reads them back. Cwd and User are where and as
// whom it runs; StdinOpen says POST .../stdin still reaches it.
type Process struct {
	Pid             int        `json:"pid"`
	Cmd             Command    `json:"cmd"`
	Cwd             string     `json:"cwd,omitempty"`
	User            string     `json:"user,omitempty"`
	StdinOpen       bool       `json:"stdin_open,omitempty"`
	Pty             bool       `json:"pty,omitempty"`
	Running         bool       `json:"running"`
	ExitCode        *int       `json:"exit_code,omitempty"`
	TimedOut        bool       `json:"timed_out,omitempty"`
	StartedAt       time.Time  `json:"started_at"`
	EndedAt         *time.Time `json:"ended_at,omitempty"`
	Stdout          string     `json:"stdout"`
	Stderr          string     `json:"stderr"`
	StdoutTruncated bool       `json:"stdout_truncated,omitempty"`
	StderrTruncated bool       `json:"stderr_truncated,omitempty"`
	StdoutB64       string     `json:"stdout_b64,omitempty"`
	StderrB64       string     `json:"stderr_b64,omitempty"`
}

// SetOutput sets p's output to the bytes stdout and stderr.
func (p *Process) SetOutput(stdout, stderr string) {
	p.Stdout, p.StdoutB64 = textAndB64(stdout)
	p.Stderr, p.StderrB64 = textAndB64(stderr)
}

// ExactOutput turns Stdout and Stderr back into the exact bytes, from
// StdoutB64 and StderrB64 where present.
func (p *Process) ExactOutput() error {
	for _, f := range []struct{ text, b64 *string }{{&p.Stdout, &p.StdoutB64}, {&p.Stderr, &p.StderrB64}} {
		if *f.b64 == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(*f.b64)
		if err != nil {
			return errors.New("process output: *_b64 is not base64")
		}
		*f.text = string(b)
	}
	return nil
}

func textAndB64(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return strings.ToValidUTF8(s, "\uFFFD"), base64.StdEncoding.EncodeToString([]byte(s))
}

// ProcessList is the body of GET /v1/sandboxes/{id}/processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// OutputCap is how much of each stream a background process keeps.
const OutputCap = 1 << 20
