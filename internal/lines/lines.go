// Package lines reads a stream line by line with a bound on a line's
// length: the one capped-line reader, a bufio.Scanner whose buffer never
// grows past the bound, for lines that come from a process the reader does
// not trust to end them (a sandbox's code driver, QEMU's monitor).
//
// It imports only the standard library, so that the sandbox agent may use
// it.
package lines

import (
	"bufio"
	"bytes"
	"io"
)

// initialBuffer is the scanner's first buffer; it grows as lines need, up
// to the bound.
const initialBuffer = 64 << 10

// New returns a scanner of r's lines, each without its "\n" or "\r\n" and
// at most max bytes long: a longer one ends the scan with
// bufio.ErrTooLong. A last line without its newline is a line.
func New(r io.Reader, max int) *bufio.Scanner {
	return scanner(r, max, false)
}

// NewWhole is New for a stream whose every line must end: a last line
// without its newline ends the scan with io.ErrUnexpectedEOF.
func NewWhole(r io.Reader, max int) *bufio.Scanner {
	return scanner(r, max, true)
}

func scanner(r io.Reader, max int, whole bool) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	// The line, "\r" and "\n": a buffer holding more holds a line over max.
	sc.Buffer(make([]byte, 0, min(initialBuffer, max+2)), max+2)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		i := bytes.IndexByte(data, '\n')
		var line []byte
		switch {
		case i >= 0:
			line = data[:i]
		case atEOF && len(data) > 0 && whole:
			return 0, nil, io.ErrUnexpectedEOF
		case atEOF && len(data) > 0:
			i, line = len(data)-1, data
		default:
			return 0, nil, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > max {
			return 0, nil, bufio.ErrTooLong
		}
		return i + 1, line, nil
	})
	return sc
}
