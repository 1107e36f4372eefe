package mcptools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The caps of the agent tools (sdk/python/withruntime/tools.py): a model
// receives a tool's answer whole, so each answer is bounded.
const (
	// OutputCap is how many characters of stdout and of stderr an exec
	// (or a cell) returns: the last ones; and how many bytes of a file
	// sandbox_read_file returns: the first ones.
	OutputCap = 20_000
	// ListCap is how many directory entries sandbox_list_files returns.
	ListCap = 400
	// DefaultTimeoutSeconds bounds a command when the call gives no
	// timeout: a server started in the foreground then costs the agent
	// two minutes, not the lease.
	DefaultTimeoutSeconds = 120
)

// tailBytes is how much of a stream tailWriter keeps: enough bytes for
// OutputCap characters of any UTF-8 text.
const tailBytes = OutputCap * utf8.UTFMax

// tailWriter keeps the last tailBytes bytes written to it, so that a
// command's output costs the server little however long it is.
type tailWriter struct {
	buf []byte
	cut bool // older bytes were dropped
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - tailBytes; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
		w.cut = true
	}
	return len(p), nil
}

// keepTail returns the last limit characters of text, led by a note when
// anything was cut (already, by the writer, or here), worded as the
// Python tools word it.
func keepTail(text string, alreadyCut bool, limit int, stream string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	n := utf8.RuneCountInString(text)
	if n <= limit && !alreadyCut {
		return text
	}
	if n > limit {
		r := []rune(text)
		text = string(r[len(r)-limit:])
		n = limit
	}
	return fmt.Sprintf("[%s was cut: only its last %d characters are shown]\n%s", stream, n, text)
}
