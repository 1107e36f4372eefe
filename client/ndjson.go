package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The longest event line a stream may send. The server cuts an exec stream
// at a line over 256 KiB and a code stream at one over 8 MiB; a longer line
// is a server gone wrong, refused before it fills the memory.
const (
	maxExecLine = 1 << 20
	maxCodeLine = 9 << 20
)

// errLineTooLong is the cause of a TransportError for an event line over
// its stream's bound.
var errLineTooLong = errors.New("event line too long")

// eventDecoder reads an ndjson stream one event a line, as json.Decoder
// would, but holds at most max bytes of one line (json.Decoder holds a
// value however long it grows).
type eventDecoder struct {
	r    *bufio.Reader
	max  int
	line []byte
}

func newEventDecoder(r io.Reader, max int) *eventDecoder {
	return &eventDecoder{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Decode reads the next non-blank line into v; io.EOF at the stream's end.
func (d *eventDecoder) Decode(v any) error {
	for {
		line, err := d.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if jerr := json.Unmarshal(line, v); jerr != nil {
				return fmt.Errorf("malformed event: %w", jerr)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line with its newline, or what is left before
// an error.
func (d *eventDecoder) readLine() ([]byte, error) {
	d.line = d.line[:0]
	for {
		frag, err := d.r.ReadSlice('\n')
		// ReadSlice ends frag with the newline exactly when err is nil; the
		// newline is not counted.
		n := len(d.line) + len(frag)
		if err == nil {
			n--
		}
		if n > d.max {
			return nil, fmt.Errorf("%w: longer than %d bytes", errLineTooLong, d.max)
		}
		d.line = append(d.line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return d.line, err
	}
}
