package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestAgentToolsResolve: tools.json resolves for every surface, with no
// placeholder left, the SDKs' tools in the SDKs' order (SPEC.md), and every
// part that only some surfaces show naming surfaces that exist.
func TestAgentToolsResolve(t *testing.T) {
	for _, s := range []string{SurfaceMCP, SurfacePython, SurfaceTypeScript} {
		tools, err := AgentTools(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		var names []string
		for _, tool := range tools {
			names = append(names, tool.MCPName+"/"+tool.SDKName)
			for _, d := range append([]string{tool.Description}, paramTexts(tool.Params)...) {
				if d == "" || strings.ContainsAny(d, "{}") {
					t.Errorf("%s: %s: a text empty or with a placeholder left: %q", s, tool.MCPName, d)
				}
			}
		}
		if s != SurfaceMCP {
			want := []string{"sandbox_exec/runtime_exec", "sandbox_read_file/runtime_read_file",
				"sandbox_write_file/runtime_write_file", "sandbox_list_files/runtime_list_files", "sandbox_run_code/runtime_run_code"}
			if !slices.Equal(names, want) {
				t.Errorf("%s: tools %v, want %v", s, names, want)
			}
		} else if len(names) != 9 {
			t.Errorf("mcp: %d tools, want 9: %v", len(names), names)
		}
	}
	var f struct {
		Surfaces map[string]any `json:"surfaces"`
	}
	if err := json.Unmarshal(AgentToolsJSON, &f); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if only, ok := v["only"].([]any); ok {
				for _, s := range only {
					if _, ok := f.Surfaces[s.(string)]; !ok {
						t.Errorf("only names a surface %v that does not exist", s)
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var all any
	json.Unmarshal(AgentToolsJSON, &all)
	walk(all)
}

func paramTexts(ps []ParamText) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Description)
		out = append(out, paramTexts(p.Params)...)
	}
	return out
}

// TestResolveRefusesUnknownPlaceholders: a misspelt placeholder is an
// error, not a brace shown to a model.
func TestResolveRefusesUnknownPlaceholders(t *testing.T) {
	words := map[string]string{"exec": "runtime_exec"}
	got, err := text{{Text: "use {exec}"}, {Only: []string{"mcp"}, Text: " (mcp)"}, {Text: "."}}.resolve("python", words)
	if err != nil || got != "use runtime_exec." {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"use {exce}", "use {exec"} {
		if _, err := (text{{Text: bad}}).resolve("python", words); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
