package build

import (
	"fmt"
	"strings"
	"unicode"
)

// expander does what Docker does to the arguments of FROM, COPY, ADD, ENV,
// ARG, WORKDIR and USER: quotes ('...' literal, "..." with $ expanded and
// the escape character escaping only ", $ and itself), the escape
// character outside quotes, and $NAME, ${NAME}, ${NAME:-word} and
// ${NAME:+word}. An unset variable expands to nothing, as in Docker.
type expander struct {
	escape rune
	lookup func(name string) (string, bool)
	// depth counts the ${NAME:-word} nested inside one another now.
	depth int
}

// Bounds of an expansion: a Dockerfile is small, but $A$A$A... or
// ${A:-${A:-...}} would make it large or slow.
const (
	maxExpandBytes = 2 * MaxCommandBytes
	maxExpandDepth = 8
)

// words splits s into words on unquoted white space, each expanded.
func (x *expander) words(s string) ([]string, error) {
	return x.process(s, true)
}

// word expands s as one word, keeping its white space.
func (x *expander) word(s string) (string, error) {
	w, err := x.process(s, false)
	if err != nil {
		return "", err
	}
	return strings.Join(w, ""), nil
}

func (x *expander) process(s string, split bool) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		flushed int
		r       = []rune(s)
		flush   = func() {
			if inWord {
				words = append(words, cur.String())
				flushed += cur.Len()
			}
			cur.Reset()
			inWord = false
		}
	)
	for i := 0; i < len(r); i++ {
		if flushed+cur.Len() > maxExpandBytes {
			return nil, fmt.Errorf("expands to more than %d bytes", maxExpandBytes)
		}
		c := r[i]
		switch {
		case split && unicode.IsSpace(c):
			flush()
		case c == '\'':
			inWord = true
			end := indexRune(r, i+1, '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(string(r[i+1 : end]))
			i = end
		case c == '"':
			inWord = true
			j := i + 1
			for ; j < len(r) && r[j] != '"'; j++ {
				switch {
				case r[j] == x.escape && j+1 < len(r) && (r[j+1] == '"' || r[j+1] == '$' || r[j+1] == x.escape):
					cur.WriteRune(r[j+1])
					j++
				case r[j] == '$':
					n, err := x.dollar(r, j, &cur)
					if err != nil {
						return nil, err
					}
					j = n
				default:
					cur.WriteRune(r[j])
				}
			}
			if j >= len(r) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			i = j
		case c == x.escape:
			inWord = true
			if i+1 < len(r) {
				cur.WriteRune(r[i+1])
				i++
			} else {
				cur.WriteRune(c)
			}
		case c == '$':
			inWord = true
			n, err := x.dollar(r, i, &cur)
			if err != nil {
				return nil, err
			}
			i = n
		default:
			inWord = true
			cur.WriteRune(c)
		}
	}
	flush()
	if flushed > maxExpandBytes {
		return nil, fmt.Errorf("expands to more than %d bytes", maxExpandBytes)
	}
	if !split && words == nil {
		words = []string{""}
	}
	return words, nil
}

func indexRune(r []rune, from int, c rune) int {
	for i := from; i < len(r); i++ {
		if r[i] == c {
			return i
		}
	}
	return -1
}

func isNameRune(c rune) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// dollar expands the reference starting at r[i] == '$' into out and
// returns the index of its last rune.
func (x *expander) dollar(r []rune, i int, out *strings.Builder) (int, error) {
	if i+1 >= len(r) {
		out.WriteRune('$')
		return i, nil
	}
	if r[i+1] != '{' {
		j := i + 1
		for j < len(r) && isNameRune(r[j]) {
			j++
		}
		if j == i+1 {
			// "$" before anything else ("$(", "$ ") stays a "$".
			out.WriteRune('$')
			return i, nil
		}
		v, _ := x.lookup(string(r[i+1 : j]))
		out.WriteString(v)
		return j - 1, nil
	}
	// ${...}: find the matching brace, nested ${ counted.
	if x.depth >= maxExpandDepth {
		return 0, fmt.Errorf("${...} nested more than %d deep", maxExpandDepth)
	}
	depth, end := 1, -1
	for j := i + 2; j < len(r); j++ {
		if r[j] == '$' && j+1 < len(r) && r[j+1] == '{' {
			depth++
			j++
		} else if r[j] == '}' {
			depth--
			if depth == 0 {
				end = j
				break
			}
		}
	}
	if end < 0 {
		return 0, fmt.Errorf("unterminated ${")
	}
	body := string(r[i+2 : end])
	n := 0
	for n < len(body) && isNameRune(rune(body[n])) {
		n++
	}
	name, op := body[:n], body[n:]
	if name == "" {
		return 0, fmt.Errorf("bad substitution ${%s}", body)
	}
	v, set := x.lookup(name)
	switch {
	case op == "":
		out.WriteString(v)
	case strings.HasPrefix(op, ":-"):
		if set && v != "" {
			out.WriteString(v)
		} else {
			w, err := x.nested(op[2:])
			if err != nil {
				return 0, err
			}
			out.WriteString(w)
		}
	case strings.HasPrefix(op, ":+"):
		if set && v != "" {
			w, err := x.nested(op[2:])
			if err != nil {
				return 0, err
			}
			out.WriteString(w)
		}
	default:
		return 0, fmt.Errorf("unsupported substitution ${%s}: only ${NAME}, ${NAME:-default} and ${NAME:+alternative}", body)
	}
	return end, nil
}

// nested expands the word of a ${NAME:-word} or ${NAME:+word} one level
// deeper.
func (x *expander) nested(s string) (string, error) {
	x.depth++
	defer func() { x.depth-- }()
	return x.word(s)
}
