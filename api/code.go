package api

import "encoding/json"

// CodeRequest is the body of POST /v1/sandboxes/{id}/code (and of the
// agent's POST /code): one cell run in a context's kernel. Code is
// required but may be empty. ContextID "" is the default context (id
// "default"), made on first use; Env is used only when this call makes it.
// Language is "" or "python". TimeoutMs 0 means no timeout of its own (the
// lease bounds it); a cell over it is interrupted and its context keeps
// its state.
type CodeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id,omitempty"`
	Language  string            `json:"language,omitempty"`
	TimeoutMs int64             `json:"timeout_ms,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// CreateContextRequest is the body of POST /v1/sandboxes/{id}/contexts.
// Relative cwd is under /workspace; the default cwd is /workspace.
// Language is "" or "python".
type CreateContextRequest struct {
	Cwd      string            `json:"cwd,omitempty"`
	Language string            `json:"language,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
}

// CodeContext is one kernel with its own state. ID is "default" or "ctx_"
// and 16 hex digits.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// CodeContextList is the body of GET /v1/sandboxes/{id}/contexts. The
// default context appears once it is made.
type CodeContextList struct {
	Contexts []CodeContext `json:"contexts"`
}

// Event types of a code stream. POST code answers 200 with Content-Type
// application/x-ndjson: one CodeEvent a line, "stdout"/"stderr"/"result"/
// "exception" in the order produced, then exactly one "end" (the cell
// finished, with or without an exception) or "error" (the platform failed:
// the same ErrorDetail as an exec stream's "error") last.
const (
	CodeEventStdout    = "stdout"
	CodeEventStderr    = "stderr"
	CodeEventResult    = "result"
	CodeEventException = "exception"
	CodeEventEnd       = "end"
	CodeEventError     = "error"
)

// CodeEvent is one line of a code stream. Text is the output of a "stdout"
// or "stderr" event (at most 32 KiB an event: longer output is split),
// ExecutionCount the kernel's count on "end".
type CodeEvent struct {
	Type           string         `json:"type"`
	Text           string         `json:"text,omitempty"`
	Result         *CodeResult    `json:"result,omitempty"`
	Exception      *CodeException `json:"exception,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	Error          *ErrorDetail   `json:"error,omitempty"`
}

// CodeResult is one rich result: the cell's value (IsMainResult) or a
// display. Each field is one MIME type of it; PNG and JPEG are base64, JSON
// is application/json. A field over 4 MiB is dropped and Text says so.
type CodeResult struct {
	Text         string          `json:"text,omitempty"`
	HTML         string          `json:"html,omitempty"`
	Markdown     string          `json:"markdown,omitempty"`
	SVG          string          `json:"svg,omitempty"`
	PNG          string          `json:"png,omitempty"`
	JPEG         string          `json:"jpeg,omitempty"`
	LaTeX        string          `json:"latex,omitempty"`
	JavaScript   string          `json:"javascript,omitempty"`
	JSON         json.RawMessage `json:"json,omitempty"`
	IsMainResult bool            `json:"is_main_result,omitempty"`
}

// CodeException is an exception the cell raised (or TimeoutError, or
// DeadKernelError when the kernel died). Traceback is plain text, without
// ANSI colour.
type CodeException struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}
