package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// decodeJSON reads exactly one JSON value of v's type from the body: no
// unknown fields, nothing after it, at most limit bytes, and no NUL byte
// in any string. An empty body leaves v as it is when allowEmpty is set.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, allowEmpty bool, v any) error {
	if r.ContentLength > limit {
		return tooLarge(limit)
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			if allowEmpty {
				return nil
			}
			return sandbox.Errorf(sandbox.KindInvalid, "request body is empty: want a JSON object")
		}
		return decodeError(err, limit)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		var tl *http.MaxBytesError
		if errors.As(err, &tl) {
			return tooLarge(limit)
		}
		return sandbox.Errorf(sandbox.KindInvalid, "malformed JSON: unexpected data after the JSON value")
	}
	if field, ok := findNUL(reflect.ValueOf(v), ""); ok {
		return sandbox.Errorf(sandbox.KindInvalid, "%s contains a NUL byte", field)
	}
	return nil
}

func tooLarge(limit int64) error {
	return sandbox.Errorf(sandbox.KindPayloadTooLarge, "request body is larger than %d bytes", limit)
}

// decodeError turns a decoding error into a client-facing one naming the
// problem.
func decodeError(err error, limit int64) error {
	var (
		tl     *http.MaxBytesError
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tl):
		return tooLarge(limit)
	case errors.As(err, &syntax):
		return sandbox.Errorf(sandbox.KindInvalid, "malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return sandbox.Errorf(sandbox.KindInvalid, "malformed JSON: the body ends before the value does")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return sandbox.Errorf(sandbox.KindInvalid, "request body must be %s, not %s", kindName(typ.Type), typ.Value)
		}
		return sandbox.Errorf(sandbox.KindInvalid, "field %s must be %s, not %s", typ.Field, kindName(typ.Type), typ.Value)
	}
	// Unknown fields and the errors of custom decoders (api.Command) only
	// have text, and that text describes the client's own input.
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return sandbox.Errorf(sandbox.KindInvalid, "invalid request body: %s", msg)
}

// kindName names a Go type the way a JSON user thinks of it.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// findNUL looks for a string holding a NUL byte anywhere in v and returns
// where it is, in JSON terms where it can.
func findNUL(v reflect.Value, at string) (string, bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return findNUL(v.Elem(), at)
	case reflect.String:
		return orBody(at), strings.IndexByte(v.String(), 0) >= 0
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := jsonName(f)
			if name == "" {
				name = at // fields without a tag of their own (api.Command) stand for their parent
			} else if at != "" {
				name = at + "." + name
			}
			if where, ok := findNUL(v.Field(i), name); ok {
				return where, true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if where, ok := findNUL(v.Index(i), fmt.Sprintf("%s[%d]", at, i)); ok {
				return where, true
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if where, ok := findNUL(iter.Key(), at+" key"); ok {
				return orBody(where), true
			}
			if where, ok := findNUL(iter.Value(), fmt.Sprintf("%s[%q]", at, iter.Key())); ok {
				return where, true
			}
		}
	}
	return "", false
}

func orBody(at string) string {
	if at == "" || strings.HasPrefix(at, " ") {
		return "request body" + at
	}
	return at
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	return name
}

// checkQuery refuses a query string that does not parse or holds a NUL
// byte: the agent resolves paths from it.
func checkQuery(r *http.Request) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return sandbox.Errorf(sandbox.KindInvalid, "malformed query string")
	}
	for k, vs := range q {
		if strings.IndexByte(k, 0) >= 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "query parameter name contains a NUL byte")
		}
		for _, v := range vs {
			if strings.IndexByte(v, 0) >= 0 {
				return sandbox.Errorf(sandbox.KindInvalid, "query parameter %s contains a NUL byte", k)
			}
		}
	}
	return nil
}

// checkRequest refuses path values and query strings that no route
// accepts, before anything acts on them.
func checkRequest(r *http.Request) error {
	for _, name := range []string{"id", "pid", "kid", "name", "cid"} {
		if v := r.PathValue(name); strings.IndexByte(v, 0) >= 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "%s contains a NUL byte", name)
		}
	}
	if pid := r.PathValue("pid"); pid != "" && !positiveInt(pid) {
		return sandbox.Errorf(sandbox.KindInvalid, "pid must be a positive integer, not %q", pid)
	}
	if cid := r.PathValue("cid"); cid != "" && !validContextID(cid) {
		return sandbox.Errorf(sandbox.KindInvalid, `context id must be "default" or "ctx_" and 16 hex digits, not %q`, cid)
	}
	return checkQuery(r)
}

func positiveInt(s string) bool {
	if len(s) == 0 || len(s) > 10 || s[0] == '0' {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
