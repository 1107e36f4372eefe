package egress

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
)

// swapHeaders replaces, in the values of h, every placeholder of bound by
// its secret's value. Only request headers are ever swapped.
func swapHeaders(h http.Header, bound []Secret) {
	if len(bound) == 0 {
		return
	}
	rep := stringReplacer(bound, func(s Secret) (string, string) { return s.Placeholder, s.Value })
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = rep.Replace(v)
		}
	}
}

// scrubHeaders turns every literal value of bound in h back into its
// placeholder: in values, and in names (compared without case, since
// header names are canonicalized on the way).
func scrubHeaders(h http.Header, bound []Secret) {
	if len(bound) == 0 {
		return
	}
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = scrubString(v, bound)
		}
		lk := strings.ToLower(k)
		for _, s := range bound {
			if strings.Contains(lk, strings.ToLower(s.Value)) {
				delete(h, k)
				h[http.CanonicalHeaderKey(strings.ReplaceAll(lk, strings.ToLower(s.Value), strings.ToLower(s.Placeholder)))] = vs
				break
			}
		}
	}
}

func scrubString(v string, bound []Secret) string {
	if len(bound) == 0 {
		return v
	}
	return stringReplacer(bound, func(s Secret) (string, string) { return s.Value, s.Placeholder }).Replace(v)
}

// stringReplacer replaces each secret's from by its to in one pass, the
// longest match first where several start at one place, never rescanning
// what it put in.
func stringReplacer(bound []Secret, pair func(Secret) (from, to string)) *strings.Replacer {
	sorted := slices.Clone(bound)
	slices.SortStableFunc(sorted, func(a, b Secret) int {
		fa, _ := pair(a)
		fb, _ := pair(b)
		return len(fb) - len(fa)
	})
	var args []string
	for _, s := range sorted {
		from, to := pair(s)
		args = append(args, from, to)
	}
	return strings.NewReplacer(args...)
}

// replacer replaces the values of secrets by their placeholders in a
// stream.
type replacer struct {
	from, to [][]byte
	keep     int // longest value minus one: what may be the start of a match
}

func newReplacer(bound []Secret) *replacer {
	r := &replacer{}
	for _, s := range bound {
		r.from = append(r.from, []byte(s.Value))
		r.to = append(r.to, []byte(s.Placeholder))
		r.keep = max(r.keep, len(s.Value)-1)
	}
	return r
}

// step replaces in in what can be replaced: out is final, rest may still
// begin a match and must be carried to the next step. With final, rest is
// empty.
func (r *replacer) step(in []byte, final bool) (out, rest []byte) {
	limit := len(in) // a match must start before limit
	if !final {
		limit = max(0, len(in)-r.keep)
	}
	out = make([]byte, 0, len(in))
	i := 0
	for {
		at, which := -1, -1
		for k, from := range r.from {
			m := bytes.Index(in[i:], from)
			if m >= 0 && (at < 0 || i+m < at || i+m == at && len(from) > len(r.from[which])) {
				at, which = i+m, k
			}
		}
		if at < 0 || at >= limit {
			break
		}
		out = append(out, in[i:at]...)
		out = append(out, r.to[which]...)
		i = at + len(r.from[which])
	}
	cut := max(i, limit)
	out = append(out, in[i:cut]...)
	return out, in[cut:]
}

// bodyReader wraps a body being relayed: before every read it flushes
// what was written to the other side (so that streamed responses and
// uploads flow), it replaces secrets' values by placeholders when rep is
// set, and it runs onEOF once the body is complete (to scrub trailers).
type bodyReader struct {
	src   io.ReadCloser
	flush *bufio.Writer
	rep   *replacer
	onEOF func()

	buf, in, out []byte
	err          error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.rep == nil {
		if err := b.flush.Flush(); err != nil {
			return 0, err
		}
		n, err := b.src.Read(p)
		if err == io.EOF {
			b.eof()
		}
		return n, err
	}
	for len(b.out) == 0 {
		if b.err != nil {
			if len(b.in) > 0 {
				b.out, _ = b.rep.step(b.in, true)
				b.in = b.in[:0]
				continue
			}
			if b.err == io.EOF {
				b.eof()
			}
			return 0, b.err
		}
		if err := b.flush.Flush(); err != nil {
			return 0, err
		}
		if b.buf == nil {
			b.buf = make([]byte, 32<<10)
		}
		n, err := b.src.Read(b.buf)
		b.in = append(b.in, b.buf[:n]...)
		b.err = err
		if err == nil {
			var rest []byte
			b.out, rest = b.rep.step(b.in, false)
			b.in = append(b.in[:0], rest...)
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *bodyReader) eof() {
	if b.onEOF != nil {
		b.onEOF()
		b.onEOF = nil
	}
}

func (b *bodyReader) Close() error { return b.src.Close() }

// writerOnly hides a bufio.Writer's ReadFrom: bodyReader flushes that
// writer before each read, which ReadFrom, reading into the writer's own
// buffer, cannot allow.
type writerOnly struct{ io.Writer }
