package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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
// value however long it grows). On a stream with a ReserveFunc it
// reserves its buffer and, as a line grows, lineHoldFactor times the line,
// until the caller asks for the next event; the body's Close gives back
// what it still holds.
type eventDecoder struct {
	r    *bufio.Reader
	max  int
	line []byte

	a       *answerBody // the stream's, when it reserves
	based   bool        // the buffer's reservation is made
	release func()      // the current line's reservation
}

// decoderBuffer is the reader's buffer; lines up to it cost no more.
const decoderBuffer = 64 << 10

// lineHoldFactor is what a line costs per byte: the line and the event
// decoded from it.
const lineHoldFactor = 2

func newEventDecoder(r io.Reader, max int) *eventDecoder {
	d := &eventDecoder{r: bufio.NewReaderSize(r, decoderBuffer), max: max, release: func() {}}
	if a, ok := r.(*answerBody); ok && a.reserve != nil {
		d.a = a
		a.onClose(func() { d.release() })
	}
	return d
}

// Decode reads the next non-blank line into v; io.EOF at the stream's end.
func (d *eventDecoder) Decode(v any) error {
	if err := d.reserveBase(); err != nil {
		return err
	}
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

// reserveBase reserves the reader's buffer once, and with it a line up to
// the buffer's size and its event; released with the body.
func (d *eventDecoder) reserveBase() error {
	if d.a == nil || d.based {
		return nil
	}
	rel, err := d.a.hold((1 + lineHoldFactor) * decoderBuffer)
	if err != nil {
		return err
	}
	d.based = true
	d.a.onClose(rel)
	return nil
}

// readLine returns the next line with its newline, or what is left before
// an error. The previous line's buffer and reservation are let go first.
func (d *eventDecoder) readLine() ([]byte, error) {
	d.release()
	d.release = func() {}
	d.line = d.line[:0]
	if cap(d.line) > decoderBuffer {
		d.line = nil // one long line does not keep its memory for the stream's life
	}
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
		if gerr := d.grow(len(frag)); gerr != nil {
			return nil, gerr
		}
		d.line = append(d.line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return d.line, err
	}
}

// grow makes room for more bytes in the line, reserving the larger buffer
// (and its event) before making it.
func (d *eventDecoder) grow(more int) error {
	need := len(d.line) + more
	if need <= cap(d.line) || d.a == nil {
		return nil
	}
	if need <= decoderBuffer {
		// The base reservation covers it.
		d.line = slices.Grow(d.line, decoderBuffer-len(d.line))
		return nil
	}
	n := min(max(need, 2*cap(d.line)), d.max+1)
	rel, err := d.a.hold(lineHoldFactor * int64(n))
	if err != nil {
		return err
	}
	nl := make([]byte, len(d.line), n)
	copy(nl, d.line)
	d.line = nl
	d.release()
	d.release = rel
	return nil
}
