package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/service"
	"github.com/withruntime/withruntime/internal/store"
)

// api/openapi.yaml is loaded and validated by kin-openapi (its $refs
// resolved, its schemas, examples and operation ids checked as OpenAPI
// 3.0 says); the tests here hold it to what the server does: its route
// table, both ways and through both routers, and the Go types of package
// api.

const openapiPath = "../../api/openapi.yaml"

// loadOpenAPI is api/openapi.yaml, loaded and validated.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openapiPath)
	if err != nil {
		t.Fatalf("loading %s: %v", openapiPath, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s is not valid OpenAPI: %v", openapiPath, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Errorf("openapi: got %q, want 3.0.x", doc.OpenAPI)
	}
	return doc
}

// TestOpenAPIValid loads and validates the document: a $ref that points
// at nothing, a schema or example that is not one, fails here.
func TestOpenAPIValid(t *testing.T) {
	loadOpenAPI(t)
}

// typeOf is the one type s names, "" for none (any JSON value).
func typeOf(s *openapi3.Schema) string {
	if s == nil || s.Type == nil {
		return ""
	}
	return strings.Join(*s.Type, "|")
}

// documentedOps is every operation of doc by "METHOD path".
func documentedOps(t *testing.T, doc *openapi3.T) map[string]*openapi3.Operation {
	documented := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		if item.Ref != "" || item.Summary != "" || item.Description != "" || len(item.Parameters) > 0 || len(item.Servers) > 0 {
			t.Errorf("%s: the path has more than operations (put parameters on operations)", path)
		}
		for method, op := range item.Operations() {
			documented[method+" "+path] = op
		}
	}
	return documented
}

// concretePath is pattern with each {parameter} filled in.
func concretePath(pattern string) string {
	return regexp.MustCompile(`\{(\w+)\}`).ReplaceAllString(pattern, "p-$1")
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)

	registered := map[string]Route{}
	for _, rt := range Routes() {
		registered[rt.Method+" "+rt.Pattern] = rt
	}
	documented := documentedOps(t, doc)
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

	if s := doc.Components.SecuritySchemes["bearerAuth"]; s == nil || s.Value.Type != "http" || s.Value.Scheme != "bearer" {
		t.Errorf("securitySchemes.bearerAuth: got %+v, want http bearer", s)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearerAuth"] == nil {
		t.Errorf("security: got %v, want bearerAuth for every operation", doc.Security)
	}

	pathParam := regexp.MustCompile(`\{(\w+)\}`)
	for key, op := range documented {
		rt, ok := registered[key]
		if !ok {
			continue
		}
		if got := op.Security != nil && len(*op.Security) == 0; got != rt.Public {
			t.Errorf("%s: operation without security is %v, want %v (only public routes skip the key)", key, got, rt.Public)
		}
		// Unique operation ids are the validation's.
		if op.OperationID == "" {
			t.Errorf("%s: no operationId", key)
		}

		// Every path parameter of the pattern is declared, and no other.
		var declared []string
		for _, p := range op.Parameters {
			if p.Value.In == openapi3.ParameterInPath {
				if !p.Value.Required {
					t.Errorf("%s: path parameter %s is not required", key, p.Value.Name)
				}
				declared = append(declared, p.Value.Name)
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

		byRef := func(status string) bool {
			r := op.Responses.Value(status)
			return r != nil && r.Ref != ""
		}
		if !rt.Public && !byRef("401") {
			t.Errorf("%s: no 401 response", key)
		}
		if rt.Mutating && !rt.Public && !byRef("403") {
			t.Errorf("%s: no 403 response for read-only keys", key)
		}
		if rt.Admin && !byRef("403") {
			t.Errorf("%s: no 403 response for keys other than admin", key)
		}
		if op.Responses.Default() == nil && !rt.Public {
			t.Errorf("%s: no default (error) response", key)
		}
	}

	schemaOf := func(op *openapi3.Operation, status, mediaType string) string {
		if op == nil {
			return ""
		}
		r := op.Responses.Value(status)
		if r == nil || r.Value == nil || r.Value.Content[mediaType] == nil || r.Value.Content[mediaType].Schema == nil {
			return ""
		}
		return r.Value.Content[mediaType].Schema.Ref
	}
	exec := documented[http.MethodPost+" "+api.Version+"/sandboxes/{id}/exec"]
	if schemaOf(exec, "200", "application/x-ndjson") != "#/components/schemas/ExecEvent" {
		t.Errorf("exec 200: want an application/x-ndjson stream of ExecEvent")
	}
	if schemaOf(exec, "201", "application/json") != "#/components/schemas/Process" {
		t.Errorf("exec 201: want a Process")
	}
	code := documented[http.MethodPost+" "+api.Version+"/sandboxes/{id}/code"]
	if schemaOf(code, "200", "application/x-ndjson") != "#/components/schemas/CodeEvent" {
		t.Errorf("code 200: want an application/x-ndjson stream of CodeEvent")
	}
	for name, r := range doc.Components.Responses {
		if mt := r.Value.Content["application/json"]; mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/ErrorBody" {
			t.Errorf("components.responses.%s: want an ErrorBody", name)
		}
	}
}

// TestOpenAPIRoutersAgree sends a request of every route through
// kin-openapi's router over the document, and one of every documented
// operation through the server's own ServeMux: each must land on the
// same method and path pattern. This holds what a client matching the
// document and the server matching its table make of one concrete path
// (a literal segment beside a parameter, say) to be the same.
func TestOpenAPIRoutersAgree(t *testing.T) {
	doc := loadOpenAPI(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	base := doc.Servers[0].URL
	for _, rt := range Routes() {
		req, err := http.NewRequest(rt.Method, base+concretePath(rt.Pattern), nil)
		if err != nil {
			t.Fatal(err)
		}
		route, _, err := router.FindRoute(req)
		switch {
		case err != nil:
			t.Errorf("%s %s: the document's router: %v", rt.Method, rt.Pattern, err)
		case route.Method != rt.Method || route.Path != rt.Pattern:
			t.Errorf("%s %s: the document's router found %s %s", rt.Method, req.URL.Path, route.Method, route.Path)
		}
	}
	mux := NewServer(Config{Sandboxes: newFakeSandboxes(""), Store: &store.Bolt{}}).(*server).mux
	for key := range documentedOps(t, doc) {
		method, path, _ := strings.Cut(key, " ")
		req, err := http.NewRequest(method, base+concretePath(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, pattern := mux.Handler(req); pattern != key {
			t.Errorf("%s: the server's mux found %q for %s", key, pattern, req.URL.Path)
		}
	}
}

// schemaTypes pairs the schemas of openapi.yaml with the Go types of
// package api they describe.
var schemaTypes = map[string]any{
	"ErrorBody":             api.ErrorBody{},
	"CreateVolumeRequest":   api.CreateVolumeRequest{},
	"Volume":                api.Volume{},
	"VolumeList":            api.VolumeList{},
	"VolumeMount":           api.VolumeMount{},
	"VolumeEntry":           api.VolumeEntry{},
	"VolumeFileList":        api.VolumeFileList{},
	"ErrorDetail":           api.ErrorDetail{},
	"Network":               api.Network{},
	"Preview":               api.Preview{},
	"SandboxMetric":         api.SandboxMetric{},
	"SandboxMetrics":        api.SandboxMetrics{},
	"PreviewSettings":       api.PreviewSettings{},
	"SetPreviewRequest":     api.SetPreviewRequest{},
	"SetPreviewsRequest":    api.SetPreviewsRequest{},
	"Template":              api.Template{},
	"Defaults":              api.Defaults{},
	"TemplateList":          api.TemplateList{},
	"TemplateBuild":         api.TemplateBuild{},
	"BuildLogEvent":         api.BuildLogEvent{},
	"SnapshotRequest":       api.SnapshotRequest{},
	"Snapshot":              api.Snapshot{},
	"SnapshotList":          api.SnapshotList{},
	"CreateSnapshotRequest": api.CreateSnapshotRequest{},
	"ForkRequest":           api.ForkRequest{},
	"ForkResult":            api.ForkResult{},
	"PublishRequest":        api.PublishRequest{},
	"CreateSandboxRequest":  api.CreateSandboxRequest{},
	"Sandbox":               api.Sandbox{},
	"SandboxList":           api.SandboxList{},
	"ExtendRequest":         api.ExtendRequest{},
	"ExecRequest":           api.ExecRequest{},
	"PtySize":               api.PtySize{},
	"PtyMessage":            api.PtyMessage{},
	"ExecEvent":             api.ExecEvent{},
	"Process":               api.Process{},
	"ProcessList":           api.ProcessList{},
	"FileInfo":              api.FileInfo{},
	"FileList":              api.FileList{},
	"ArchiveResult":         api.ArchiveResult{},
	"SandboxUsage":          api.SandboxUsage{},
	"CreateAccountRequest":  api.CreateAccountRequest{},
	"Account":               api.Account{},
	"AccountList":           api.AccountList{},
	"CreateKeyRequest":      api.CreateKeyRequest{},
	"Key":                   api.Key{},
	"KeyList":               api.KeyList{},
	"UsageRow":              api.UsageRow{},
	"Usage":                 api.Usage{},
	"Trial":                 api.Trial{},
	"EgressEvent":           api.EgressEvent{},
	"EgressLog":             api.EgressLog{},
	"SecretInfo":            api.SecretInfo{},
	"SetSecretRequest":      api.SetSecretRequest{},
	"SecretList":            api.SecretList{},
	"CodeRequest":           api.CodeRequest{},
	"CreateContextRequest":  api.CreateContextRequest{},
	"CodeContext":           api.CodeContext{},
	"CodeContextList":       api.CodeContextList{},
	"CodeEvent":             api.CodeEvent{},
	"CodeResult":            api.CodeResult{},
	"CodeException":         api.CodeException{},
	"CreateWebhookRequest":  api.CreateWebhookRequest{},
	"Webhook":               api.Webhook{},
	"WebhookDelivery":       api.WebhookDelivery{},
	"WebhookList":           api.WebhookList{},
	"AuditEntry":            api.AuditEntry{},
	"AuditLog":              api.AuditLog{},
}

// schemasWithoutType are described in openapi.yaml with no struct of their
// own: Health is a map, Command has its own JSON methods.
var schemasWithoutType = []string{"Health", "Command"}

func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := doc.Components.Schemas
	for name := range schemas {
		if _, ok := schemaTypes[name]; !ok && !slices.Contains(schemasWithoutType, name) {
			t.Errorf("schema %s: no Go type in schemaTypes", name)
		}
	}
	for name, v := range schemaTypes {
		t.Run(name, func(t *testing.T) {
			ref := schemas[name]
			if ref == nil || ref.Value == nil {
				t.Fatalf("openapi.yaml has no schema %s", name)
			}
			s := ref.Value
			if typeOf(s) != "object" {
				t.Errorf("type: got %q, want object", typeOf(s))
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
	if cmd == nil || len(cmd.Value.OneOf) != 2 || typeOf(cmd.Value.OneOf[0].Value) != "string" ||
		typeOf(cmd.Value.OneOf[1].Value) != "array" || cmd.Value.OneOf[1].Value.Items == nil || typeOf(cmd.Value.OneOf[1].Value.Items.Value) != "string" {
		t.Errorf("Command: want oneOf a string and an array of strings, got %+v", cmd)
	}
}

var (
	timeType    = reflect.TypeOf(time.Time{})
	rawJSONType = reflect.TypeOf(json.RawMessage{})
	apiPkgPath  = reflect.TypeOf(api.Sandbox{}).PkgPath()
)

// checkSchemaType checks that the schema of ref describes Go type t as
// encoding/json writes it.
func checkSchemaType(t *testing.T, where string, typ reflect.Type, ref *openapi3.SchemaRef) {
	t.Helper()
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	s := ref.Value
	want := func(typeName, format string) {
		if typeOf(s) != typeName || s.Format != format {
			t.Errorf("%s: got type %q format %q, want %q %q", where, typeOf(s), s.Format, typeName, format)
		}
	}
	switch {
	case typ == timeType:
		want("string", "date-time")
	case typ == rawJSONType:
		want("", "") // any JSON value
	case typ.PkgPath() == apiPkgPath && typ.Kind() == reflect.Struct:
		if want := "#/components/schemas/" + typ.Name(); ref.Ref != want {
			t.Errorf("%s: got $ref %q, want %q", where, ref.Ref, want)
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
		if s.AdditionalProperties.Schema == nil {
			t.Errorf("%s: a map needs additionalProperties", where)
		} else {
			checkSchemaType(t, where+"{}", typ.Elem(), s.AdditionalProperties.Schema)
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
	doc := loadOpenAPI(t)
	prop := func(schema, name string) []string {
		s := doc.Components.Schemas[schema]
		if s == nil || s.Value.Properties[name] == nil {
			t.Fatalf("no property %s.%s", schema, name)
		}
		var enum []string
		for _, v := range s.Value.Properties[name].Value.Enum {
			enum = append(enum, fmt.Sprint(v))
		}
		return enum
	}
	var codes []string
	for _, k := range service.Kinds() {
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
