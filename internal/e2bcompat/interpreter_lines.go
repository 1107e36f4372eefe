package e2bcompat

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/withruntime/withruntime/api"
)

// The line types of E2B's /execute stream. Clients ignore types they do
// not know, so lineKeepalive keeps a quiet cell's connection busy.
const (
	lineStdout     = "stdout"
	lineStderr     = "stderr"
	lineResult     = "result"
	lineError      = "error"
	lineCount      = "number_of_executions"
	lineEnd        = "end_of_execution"
	lineKeepalive  = "keepalive"
	sandboxErrName = "SandboxError"
)

// outputLine is a stdout or stderr chunk. Timestamp is Unix nanoseconds:
// the Python client passes it to its callbacks and needs it there.
type outputLine struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Timestamp int64  `json:"timestamp"`
}

// resultLine is a rich result; each MIME type is a field of its own.
type resultLine struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	HTML         string          `json:"html,omitempty"`
	Markdown     string          `json:"markdown,omitempty"`
	SVG          string          `json:"svg,omitempty"`
	PNG          string          `json:"png,omitempty"`
	JPEG         string          `json:"jpeg,omitempty"`
	LaTeX        string          `json:"latex,omitempty"`
	JavaScript   string          `json:"javascript,omitempty"`
	JSON         json.RawMessage `json:"json,omitempty"`
	IsMainResult bool            `json:"is_main_result"`
}

// errorLine is the exception a cell ended with; the Python client needs
// all three fields.
type errorLine struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

type countLine struct {
	Type           string `json:"type"`
	ExecutionCount int    `json:"execution_count"`
}

type typeLine struct {
	Type string `json:"type"`
}

func stdoutLine(text string, at time.Time) any {
	return outputLine{Type: lineStdout, Text: text, Timestamp: at.UnixNano()}
}

func stderrLine(text string, at time.Time) any {
	return outputLine{Type: lineStderr, Text: text, Timestamp: at.UnixNano()}
}

func resultOf(r api.CodeResult) any {
	return resultLine{
		Type: lineResult, Text: r.Text, HTML: r.HTML, Markdown: r.Markdown, SVG: r.SVG,
		PNG: r.PNG, JPEG: r.JPEG, LaTeX: r.LaTeX, JavaScript: r.JavaScript, JSON: r.JSON,
		IsMainResult: r.IsMainResult,
	}
}

func errorOf(e api.CodeException) any {
	return errorLine{Type: lineError, Name: e.Name, Value: e.Value, Traceback: e.Traceback}
}

// endLines are the lines that close a cell's stream: its exception, if
// any, its execution count, then end_of_execution.
func endLines(exc *api.CodeException, count int) []any {
	var out []any
	if exc != nil {
		out = append(out, errorOf(*exc))
	}
	return append(out, countLine{Type: lineCount, ExecutionCount: count}, typeLine{Type: lineEnd})
}

// encodeLine is v as one NDJSON line: a JSON object and "\n", never a
// blank line (both clients parse every line). HTML is not escaped: it
// would only make results longer.
func encodeLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
