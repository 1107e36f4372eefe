package mcptools

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
)

// The tools' descriptions and their arguments' are api/tools.json's, the
// one text the SDKs' agent tools are generated from too: here each tool's
// input schema is inferred from its Go type, as the MCP SDK would, and the
// descriptions are set on it from that file. The schemas are made once per
// process, so that a server per request (/v1/mcp) reuses them and its
// SchemaCache finds them by pointer.

// inputTypes is each tool's arguments' type.
var inputTypes = map[string]reflect.Type{
	"sandbox_create":     reflect.TypeFor[CreateInput](),
	"sandbox_list":       reflect.TypeFor[ListInput](),
	"sandbox_stop":       reflect.TypeFor[StopInput](),
	"sandbox_fork":       reflect.TypeFor[ForkInput](),
	"sandbox_exec":       reflect.TypeFor[ExecInput](),
	"sandbox_read_file":  reflect.TypeFor[ReadFileInput](),
	"sandbox_write_file": reflect.TypeFor[WriteFileInput](),
	"sandbox_list_files": reflect.TypeFor[ListFilesInput](),
	"sandbox_run_code":   reflect.TypeFor[RunCodeInput](),
}

var described = sync.OnceValues(describeTools)

// describeTools returns each tool, by name, with its description and its
// input schema, or an error when tools.json and the Go types disagree (a
// parameter one has and the other lacks).
func describeTools() (map[string]*mcp.Tool, error) {
	texts, err := api.AgentTools(api.SurfaceMCP)
	if err != nil {
		return nil, err
	}
	out := map[string]*mcp.Tool{}
	for _, t := range texts {
		typ, ok := inputTypes[t.MCPName]
		if !ok {
			return nil, fmt.Errorf("api/tools.json describes %s, which the MCP server does not have", t.MCPName)
		}
		schema, err := jsonschema.ForType(typ, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.MCPName, err)
		}
		if err := describeParams(schema, t.Params); err != nil {
			return nil, fmt.Errorf("%s: %w", t.MCPName, err)
		}
		out[t.MCPName] = &mcp.Tool{Name: t.MCPName, Description: t.Description, InputSchema: schema}
	}
	for name := range inputTypes {
		if out[name] == nil {
			return nil, fmt.Errorf("api/tools.json does not describe %s", name)
		}
	}
	return out, nil
}

// describeParams sets the description of each of the object schema's
// properties (and of theirs) from params, which must name the same
// properties.
func describeParams(schema *jsonschema.Schema, params []api.ParamText) error {
	names := make([]string, 0, len(params))
	for _, p := range params {
		prop, ok := schema.Properties[p.Name]
		if !ok {
			return fmt.Errorf("api/tools.json describes a parameter %s that the tool does not take", p.Name)
		}
		prop.Description = p.Description
		if err := describeParams(prop, p.Params); err != nil {
			return fmt.Errorf("%s.%w", p.Name, err)
		}
		names = append(names, p.Name)
	}
	for name := range schema.Properties {
		if !slices.Contains(names, name) {
			return fmt.Errorf("parameter %s has no description in api/tools.json", name)
		}
	}
	return nil
}

// tool returns the named tool with its description and input schema and
// the annotations given; the tools' table is tested, so an error here is a
// build that never passed its tests.
func tool(name string, annotations *mcp.ToolAnnotations) *mcp.Tool {
	tools, err := described()
	if err != nil {
		panic("mcptools: " + err.Error())
	}
	t, ok := tools[name]
	if !ok {
		panic("mcptools: no tool " + name)
	}
	c := *t
	c.Annotations = annotations
	return &c
}
