package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/store"
)

// The parts of an OpenAPI 3.0 document these tests read.
type oaDoc struct {
	OpenAPI    string                            `yaml:"openapi"`
	Security   []map[string][]string             `yaml:"security"`
	Paths      map[string]map[string]oaOperation `yaml:"paths"`
	Components struct {
		SecuritySchemes map[string]struct {
			Type   string `yaml:"type"`
			Scheme string `yaml:"scheme"`
		} `yaml:"securitySchemes"`
		Parameters map[string]oaParameter `yaml:"parameters"`
		Responses  map[string]oaResponse  `yaml:"responses"`
		Schemas    map[string]*oaSchema   `yaml:"schemas"`
	} `yaml:"components"`
}

type oaOperation struct {
	OperationID string                 `yaml:"operationId"`
	Security    *[]map[string][]string `yaml:"security"`
	Parameters  []oaParameter          `yaml:"parameters"`
	RequestBody *oaContent             `yaml:"requestBody"`
	Responses   map[string]oaResponse  `yaml:"responses"`
}

type oaParameter struct {
	Ref      string    `yaml:"$ref"`
	Name     string    `yaml:"name"`
	In       string    `yaml:"in"`
	Required bool      `yaml:"required"`
	Schema   *oaSchema `yaml:"schema"`
}

type oaContent struct {
	Content map[string]struct {
		Schema *oaSchema `yaml:"schema"`
	} `yaml:"content"`
}

type oaResponse struct {
	Ref       string `yaml:"$ref"`
	oaContent `yaml:",inline"`
}

type oaSchema struct {
	Ref                  string               `yaml:"$ref"`
	Type                 string               `yaml:"type"`
	Format               string               `yaml:"format"`
	Properties           map[string]*oaSchema `yaml:"properties"`
	Required             []string             `yaml:"required"`
	Items                *oaSchema            `yaml:"items"`
	AdditionalProperties *oaSchema            `yaml:"additionalProperties"`
	OneOf                []*oaSchema          `yaml:"oneOf"`
	Enum                 []string             `yaml:"enum"`
}

const openapiPath = "../../api/openapi.yaml"

func loadOpenAPI(t *testing.T) (*oaDoc, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(openapiPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc oaDoc
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parsing %s: %v", openapiPath, err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatalf("parsing %s: %v", openapiPath, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Errorf("openapi: got %q, want 3.0.x", doc.OpenAPI)
	}
	return &doc, raw
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc, _ := loadOpenAPI(t)

	registered := map[string]Route{}
	for _, rt := range Routes() {
		registered[rt.Method+" "+rt.Pattern] = rt
	}
	documented := map[string]oaOperation{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if !slices.Contains(httpMethods, method) {
				t.Errorf("%s: %q is not an operation (put parameters on operations)", path, method)
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = op
		}
	}
	for _, key := range slices.Sorted(maps.Keys(registered)) {
		if _, ok := documented[key]; !ok {
			t.Errorf("%s: served but not in openapi.yaml", key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := registered[key]; !ok {
			t.Errorf("%s: in openapi.yaml but not served", key)
		}
	}

	if s := doc.Components.SecuritySchemes["bearerAuth"]; s.Type != "http" || s.Scheme != "bearer" {
		t.Errorf("securitySchemes.bearerAuth: got %+v, want http bearer", s)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearerAuth"] == nil {
		t.Errorf("security: got %v, want bearerAuth for every operation", doc.Security)
	}

	pathParam := regexp.MustCompile(`\{(\w+)\}`)
	opIDs := map[string]string{}
	for key, op := range documented {
		rt, ok := registered[key]
		if !ok {
			continue
		}
		if got := op.Security != nil && len(*op.Security) == 0; got != rt.Public {
			t.Errorf("%s: operation without security is %v, want %v (only public routes skip the key)", key, got, rt.Public)
		}
		if op.OperationID == "" {
			t.Errorf("%s: no operationId", key)
		} else if other, dup := opIDs[op.OperationID]; dup {
			t.Errorf("%s: operationId %s also names %s", key, op.OperationID, other)
		}
		opIDs[op.OperationID] = key

		// Every path parameter of the pattern is declared, and no other.
		var declared []string
		for _, p := range op.Parameters {
			if p.Ref != "" {
				name := strings.TrimPrefix(p.Ref, "#/components/parameters/")
				p = doc.Components.Parameters[name]
			}
			if p.In == "path" {
				if !p.Required {
					t.Errorf("%s: path parameter %s is not required", key, p.Name)
				}
				declared = append(declared, p.Name)
			}
		}
		var want []string
		for _, m := range pathParam.FindAllStringSubmatch(rt.Pattern, -1) {
			want = append(want, m[1])
		}
		slices.Sort(declared)
		slices.Sort(want)
		if !slices.Equal(declared, want) {
			t.Errorf("%s: path parameters got %v, want %v", key, declared, want)
		}

		if !rt.Public && op.Responses["401"].Ref == "" {
			t.Errorf("%s: no 401 response", key)
		}
		if rt.Mutating && !rt.Public && op.Responses["403"].Ref == "" {
			t.Errorf("%s: no 403 response for read-only keys", key)
		}
		if rt.Admin && op.Responses["403"].Ref == "" {
			t.Errorf("%s: no 403 response for keys other than admin", key)
		}
		if _, ok := op.Responses["default"]; !ok && !rt.Public {
			t.Errorf("%s: no default (error) response", key)
		}
	}

	exec := documented[http.MethodPost+" "+api.Version+"/sandboxes/{id}/exec"]
	if s := exec.Responses["200"].Content["application/x-ndjson"].Schema; s == nil || s.Ref != "#/components/schemas/ExecEvent" {
		t.Errorf("exec 200: want an application/x-ndjson stream of ExecEvent")
	}
	if s := exec.Responses["201"].Content["application/json"].Schema; s == nil || s.Ref != "#/components/schemas/Process" {
		t.Errorf("exec 201: want a Process")
	}
	code := documented[http.MethodPost+" "+api.Version+"/sandboxes/{id}/code"]
	if s := code.Responses["200"].Content["application/x-ndjson"].Schema; s == nil || s.Ref != "#/components/schemas/CodeEvent" {
		t.Errorf("code 200: want an application/x-ndjson stream of CodeEvent")
	}
	for name, r := range doc.Components.Responses {
		if s := r.Content["application/json"].Schema; s == nil || s.Ref != "#/components/schemas/ErrorBody" {
			t.Errorf("components.responses.%s: want an ErrorBody", name)
		}
	}
}

// schemaTypes pairs the schemas of openapi.yaml with the Go types of
// package api they describe.
var schemaTypes = map[string]any{
	"ErrorBody":            api.ErrorBody{},
	"ErrorDetail":          api.ErrorDetail{},
	"Network":              api.Network{},
	"CreateSandboxRequest": api.CreateSandboxRequest{},
	"Sandbox":              api.Sandbox{},
	"SandboxList":          api.SandboxList{},
	"ExtendRequest":        api.ExtendRequest{},
	"ExecRequest":          api.ExecRequest{},
	"ExecEvent":            api.ExecEvent{},
	"Process":              api.Process{},
	"ProcessList":          api.ProcessList{},
	"FileInfo":             api.FileInfo{},
	"FileList":             api.FileList{},
	"ArchiveResult":        api.ArchiveResult{},
	"SandboxUsage":         api.SandboxUsage{},
	"CreateAccountRequest": api.CreateAccountRequest{},
	"Account":              api.Account{},
	"AccountList":          api.AccountList{},
	"CreateKeyRequest":     api.CreateKeyRequest{},
	"Key":                  api.Key{},
	"KeyList":              api.KeyList{},
	"UsageRow":             api.UsageRow{},
	"Usage":                api.Usage{},
	"Trial":                api.Trial{},
	"EgressEvent":          api.EgressEvent{},
	"EgressLog":            api.EgressLog{},
	"SecretInfo":           api.SecretInfo{},
	"SetSecretRequest":     api.SetSecretRequest{},
	"SecretList":           api.SecretList{},
	"CodeRequest":          api.CodeRequest{},
	"CreateContextRequest": api.CreateContextRequest{},
	"CodeContext":          api.CodeContext{},
	"CodeContextList":      api.CodeContextList{},
	"CodeEvent":            api.CodeEvent{},
	"CodeResult":           api.CodeResult{},
	"CodeException":        api.CodeException{},
}

// schemasWithoutType are described in openapi.yaml with no struct of their
// own: Health is a map, Command has its own JSON methods.
var schemasWithoutType = []string{"Health", "Command"}

func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	schemas := doc.Components.Schemas
	for name := range schemas {
		if _, ok := schemaTypes[name]; !ok && !slices.Contains(schemasWithoutType, name) {
			t.Errorf("schema %s: no Go type in schemaTypes", name)
		}
	}
	for name, v := range schemaTypes {
		t.Run(name, func(t *testing.T) {
			s := schemas[name]
			if s == nil {
				t.Fatalf("openapi.yaml has no schema %s", name)
			}
			if s.Type != "object" {
				t.Errorf("type: got %q, want object", s.Type)
			}
			typ := reflect.TypeOf(v)
			var props, required []string
			fields := map[string]reflect.StructField{}
			for i := range typ.NumField() {
				f := typ.Field(i)
				tag := f.Tag.Get("json")
				jname, opts, _ := strings.Cut(tag, ",")
				if !f.IsExported() || jname == "-" {
					continue
				}
				if jname == "" {
					t.Fatalf("field %s has no json name", f.Name)
				}
				props = append(props, jname)
				fields[jname] = f
				if !strings.Contains(opts, "omitempty") {
					required = append(required, jname)
				}
			}
			slices.Sort(props)
			slices.Sort(required)
			got := slices.Sorted(maps.Keys(s.Properties))
			if !slices.Equal(got, props) {
				t.Errorf("properties: got %v, want the json names %v", got, props)
			}
			gotReq := slices.Sorted(slices.Values(s.Required))
			if !slices.Equal(gotReq, required) {
				t.Errorf("required: got %v, want the fields without omitempty %v", gotReq, required)
			}
			for jname, f := range fields {
				if p := s.Properties[jname]; p != nil {
					checkSchemaType(t, name+"."+jname, f.Type, p)
				}
			}
		})
	}

	cmd := schemas["Command"]
	if cmd == nil || len(cmd.OneOf) != 2 || cmd.OneOf[0].Type != "string" ||
		cmd.OneOf[1].Type != "array" || cmd.OneOf[1].Items == nil || cmd.OneOf[1].Items.Type != "string" {
		t.Errorf("Command: want oneOf a string and an array of strings, got %+v", cmd)
	}
}

var (
	timeType    = reflect.TypeOf(time.Time{})
	rawJSONType = reflect.TypeOf(json.RawMessage{})
	apiPkgPath  = reflect.TypeOf(api.Sandbox{}).PkgPath()
)

// checkSchemaType checks that schema s describes Go type t as encoding/json
// writes it.
func checkSchemaType(t *testing.T, where string, typ reflect.Type, s *oaSchema) {
	t.Helper()
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := func(typeName, format string) {
		if s.Type != typeName || s.Format != format {
			t.Errorf("%s: got type %q format %q, want %q %q", where, s.Type, s.Format, typeName, format)
		}
	}
	switch {
	case typ == timeType:
		want("string", "date-time")
	case typ == rawJSONType:
		want("", "") // any JSON value
	case typ.PkgPath() == apiPkgPath && typ.Kind() == reflect.Struct:
		if ref := "#/components/schemas/" + typ.Name(); s.Ref != ref {
			t.Errorf("%s: got $ref %q, want %q", where, s.Ref, ref)
		}
	case typ.Kind() == reflect.String:
		want("string", "")
	case typ.Kind() == reflect.Bool:
		want("boolean", "")
	case typ.Kind() == reflect.Int64:
		want("integer", "int64")
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want("integer", "")
	case typ.Kind() == reflect.Float64:
		want("number", "double")
	case typ.Kind() == reflect.Map:
		want("object", "")
		if s.AdditionalProperties == nil {
			t.Errorf("%s: a map needs additionalProperties", where)
		} else {
			checkSchemaType(t, where+"{}", typ.Elem(), s.AdditionalProperties)
		}
	case typ.Kind() == reflect.Slice:
		want("array", "")
		if s.Items == nil {
			t.Errorf("%s: an array needs items", where)
		} else {
			checkSchemaType(t, where+"[]", typ.Elem(), s.Items)
		}
	default:
		t.Errorf("%s: no rule for Go type %s", where, typ)
	}
}

func TestOpenAPIEnums(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	prop := func(schema, name string) []string {
		s := doc.Components.Schemas[schema]
		if s == nil || s.Properties[name] == nil {
			t.Fatalf("no property %s.%s", schema, name)
		}
		return s.Properties[name].Enum
	}
	var codes []string
	for k := range statuses {
		codes = append(codes, string(k))
	}
	tests := []struct {
		schema, prop string
		want         []string
	}{
		{"ErrorDetail", "code", codes},
		{"Sandbox", "state", []string{"starting", "running", "paused", "ended"}},
		{"Sandbox", "end_reason", []string{"stopped", "lease_ended", "out_of_memory", "spending_limit", "retention_ended", "host_restart", "node_lost", "error"}},
		{"Sandbox", "on_lease_end", []string{"stop", "pause"}},
		{"CreateSandboxRequest", "on_lease_end", []string{"stop", "pause"}},
		{"ExecEvent", "type", []string{api.EventStart, api.EventStdout, api.EventStderr, api.EventExit, api.EventError}},
		{"CodeEvent", "type", []string{api.CodeEventStdout, api.CodeEventStderr, api.CodeEventResult, api.CodeEventException, api.CodeEventEnd, api.CodeEventError}},
		{"FileInfo", "type", []string{api.FileTypeFile, api.FileTypeDir, api.FileTypeSymlink, api.FileTypeOther}},
		{"Key", "kind", []string{string(store.KeyAdmin), string(store.KeyFull), string(store.KeyReadOnly)}},
		{"CreateKeyRequest", "kind", []string{string(store.KeyAdmin), string(store.KeyFull), string(store.KeyReadOnly)}},
	}
	for _, tt := range tests {
		got := slices.Sorted(slices.Values(prop(tt.schema, tt.prop)))
		want := slices.Sorted(slices.Values(tt.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s.%s enum: got %v, want %v", tt.schema, tt.prop, got, want)
		}
	}
}

// TestOpenAPIRefsResolve checks that every $ref points at something.
func TestOpenAPIRefsResolve(t *testing.T) {
	_, raw := loadOpenAPI(t)
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == "$ref" {
					ref, _ := e.(string)
					if !resolves(raw, ref) {
						t.Errorf("%s: $ref %q points at nothing", at, ref)
					}
					continue
				}
				walk(e, at+"/"+k)
			}
		case []any:
			for _, e := range v {
				walk(e, at+"[]")
			}
		}
	}
	walk(raw, "")
}

func resolves(doc map[string]any, ref string) bool {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var cur any = doc
	for _, part := range strings.Split(path, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}
