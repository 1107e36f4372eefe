package build

import (
	"errors"
	"testing"
)

// FuzzParseDockerfile: any text parses or is refused with an *Error, and
// what parses passes the spec's own checks.
func FuzzParseDockerfile(f *testing.F) {
	for _, s := range []string{
		"FROM default\nRUN echo hi",
		"ARG A=1\nFROM img:${A:-x}\nENV B=\"$A ${A:+y}\" C='q'\nCOPY --chown=user a b/ /c/\nCMD [\"a\"]",
		"# escape=`\nFROM default\nRUN a `\n b",
		"FROM default\nENV A=${B:-${C:-${D}}}",
		"FROM default\nENV A=\"\\$x\\\"\" B=$",
		"FROM default\nWORKDIR ${",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseDockerfile(text, nil)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *build.Error", err)
			}
			return
		}
		s.Name = "fuzz"
		if err := s.Validate(); err != nil {
			t.Fatalf("a parsed Dockerfile fails Validate: %v", err)
		}
	})
}

// FuzzDecode: any body decodes or is refused with an *Error, and what
// decodes round-trips through Validate.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"name": "a", "steps": [{"run": "x", "user": "root"}, {"copy": {"src": "a", "dest": "/b"}}]}`))
	f.Add([]byte(`{"name": "a", "dockerfile": "FROM default", "build_args": {"A": "1"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := Decode(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *build.Error", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("a decoded spec fails Validate: %v", err)
		}
	})
}
