package mcptools

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/withruntime/withruntime/api"
)

// TestDescriptionsAreToolsJSON holds the tools a client lists to
// api/tools.json: each tool's description and each argument's (nested ones
// too) are the file's, and every argument has one.
func TestDescriptionsAreToolsJSON(t *testing.T) {
	texts, err := api.AgentTools(api.SurfaceMCP)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&fakeAPI{files: map[string]string{}}).handler())
	defer srv.Close()
	res, err := connect(t, srv, "good").ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for i, tool := range res.Tools {
		listed[tool.Name] = i
	}
	if len(res.Tools) != len(texts) {
		t.Errorf("the server lists %d tools, api/tools.json describes %d", len(res.Tools), len(texts))
	}
	for _, want := range texts {
		i, ok := listed[want.MCPName]
		if !ok {
			t.Errorf("%s: described in api/tools.json but not listed", want.MCPName)
			continue
		}
		got := res.Tools[i]
		if got.Description != want.Description {
			t.Errorf("%s: description\n got %q\nwant %q", got.Name, got.Description, want.Description)
		}
		b, _ := json.Marshal(got.InputSchema)
		var schema jsonschema.Schema
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		checkParams(t, got.Name, &schema, want.Params)
	}
}

func checkParams(t *testing.T, where string, schema *jsonschema.Schema, want []api.ParamText) {
	t.Helper()
	if len(schema.Properties) != len(want) {
		t.Errorf("%s: %d properties, api/tools.json describes %d", where, len(schema.Properties), len(want))
	}
	for _, p := range want {
		prop, ok := schema.Properties[p.Name]
		if !ok {
			t.Errorf("%s: no property %s", where, p.Name)
			continue
		}
		if prop.Description == "" || prop.Description != p.Description {
			t.Errorf("%s.%s: description\n got %q\nwant %q", where, p.Name, prop.Description, p.Description)
		}
		checkParams(t, where+"."+p.Name, prop, p.Params)
	}
}

// TestDescriptionsStateTheCaps holds the figures the descriptions give to
// the constants the tools apply.
func TestDescriptionsStateTheCaps(t *testing.T) {
	tools, err := described()
	if err != nil {
		t.Fatal(err)
	}
	for name, figure := range map[string]int{"sandbox_read_file": OutputCap, "sandbox_list_files": ListCap} {
		if d := tools[name].Description; !strings.Contains(d, " "+strconv.Itoa(figure)+" ") {
			t.Errorf("%s: the description does not say %d: %q", name, figure, d)
		}
	}
	for _, name := range []string{"sandbox_exec", "sandbox_run_code"} {
		d := tools[name].InputSchema.(*jsonschema.Schema).Properties["timeout_seconds"].Description
		if !strings.HasSuffix(d, "absent or 0 means "+strconv.Itoa(DefaultTimeoutSeconds)+" seconds.") {
			t.Errorf("%s: timeout_seconds does not state the default: %q", name, d)
		}
	}
}

// TestDescribeParamsRefusesDrift: a parameter the Go type has and the file
// lacks, or the file has and the Go type lacks, is an error, not a tool
// with an undescribed argument.
func TestDescribeParamsRefusesDrift(t *testing.T) {
	fresh := func() *jsonschema.Schema {
		s, err := jsonschema.For[ExecInput](nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	all := []api.ParamText{{Name: "sandbox_id", Description: "a"}, {Name: "command", Description: "b"},
		{Name: "cwd", Description: "c"}, {Name: "timeout_seconds", Description: "d"}}
	if err := describeParams(fresh(), all); err != nil {
		t.Fatalf("all parameters described: %v", err)
	}
	if err := describeParams(fresh(), all[1:]); err == nil || !strings.Contains(err.Error(), "sandbox_id has no description") {
		t.Errorf("a parameter left out: got %v", err)
	}
	extra := append(all[:4:4], api.ParamText{Name: "env", Description: "e"})
	if err := describeParams(fresh(), extra); err == nil || !strings.Contains(err.Error(), "env") {
		t.Errorf("a parameter the tool does not take: got %v", err)
	}
}
