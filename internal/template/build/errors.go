package build

import "fmt"

// Error is a refused build specification or Dockerfile. It names where the
// mistake is: Field, a path into the spec such as "steps[3].copy.dest", or
// Line, the line of the Dockerfile where the instruction starts. Every
// Error is the client's to fix; the caller maps it to invalid_request.
type Error struct {
	Field string
	Line  int
	Msg   string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0:
		return fmt.Sprintf("Dockerfile line %d: %s", e.Line, e.Msg)
	case e.Field != "":
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

func fieldErr(field, format string, a ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, a...)}
}

func lineErr(line int, format string, a ...any) error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, a...)}
}
