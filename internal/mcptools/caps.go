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

// tailWriter keeps the last tailBytes bytes written to it (and at most as
// many more), so that a command's output costs the server little however
// long it is.
type tailWriter struct {
	buf []byte
	cut bool // older bytes were dropped
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	w.trim()
	return len(p), nil
}

func (w *tailWriter) WriteString(s string) {
	w.buf = append(w.buf, s...)
	w.trim()
}

// trim drops older bytes only past twice tailBytes, so that each byte is
// moved a bounded number of times, not once per write.
func (w *tailWriter) trim() {
	if len(w.buf) > 2*tailBytes {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-tailBytes:]...)
		w.cut = true
	}
}

// keepTail returns the last limit characters of text, led by a note when
// anything was cut (already, by the writer, or here), worded as the
// Python tools word it.
func keepTail(text string, alreadyCut bool, limit int, stream string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	cut := alreadyCut
	if i := tailStart(text, limit); i > 0 {
		text, cut = text[i:], true
	}
	if !cut {
		return text
	}
	return fmt.Sprintf("[%s was cut: only its last %d characters are shown]\n%s", stream, utf8.RuneCountInString(text), text)
}

// tailStart is where the last n characters of s (valid UTF-8) start.
func tailStart(s string, n int) int {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return i
}

// headEnd is where the first n characters of s (valid UTF-8) end.
func headEnd(s string, n int) int {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}
