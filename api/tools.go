package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// AgentToolsJSON is tools.json: the agent tools' descriptions, written
// once for the MCP server and both SDKs (whose copies are generated from
// it and checked against it by their tests).
//
//go:embed tools.json
var AgentToolsJSON []byte

// The surfaces a tool's texts are resolved for: each has its own tool
// names and its own words for "left out" and "true".
const (
	SurfaceMCP        = "mcp"
	SurfacePython     = "python"
	SurfaceTypeScript = "typescript"
)

// ToolText is one agent tool as one surface shows it to a model.
type ToolText struct {
	// MCPName is the MCP server's name of the tool (sandbox_exec), SDKName
	// the SDKs' (runtime_exec), "" for a tool the SDKs do not have.
	MCPName, SDKName string
	// Description is the summary, then a blank line and the details when
	// there are any.
	Description string
	// Params are the tool's arguments on this surface, in order.
	Params []ParamText
}

// ParamText is one argument of a tool and, for an object, its fields.
type ParamText struct {
	Name, Description string
	Params            []ParamText
}

// toolsFile is tools.json's shape.
type toolsFile struct {
	Surfaces map[string]map[string]string `json:"surfaces"`
	Tools    []struct {
		MCP     string      `json:"mcp"`
		SDK     string      `json:"sdk"`
		Summary text        `json:"summary"`
		Details text        `json:"details"`
		Params  []paramJSON `json:"params"`
	} `json:"tools"`
}

type paramJSON struct {
	Name        string      `json:"name"`
	Only        []string    `json:"only"`
	Description text        `json:"description"`
	Params      []paramJSON `json:"params"`
}

// text is a string or a list of parts, each a string or a part that only
// some surfaces show.
type text []textPart

type textPart struct {
	Only []string `json:"only"`
	Text string   `json:"text"`
}

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = text{{Text: s}}
		return nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("a text is a string or a list of parts: %w", err)
	}
	for _, raw := range parts {
		var p textPart
		if json.Unmarshal(raw, &p.Text) != nil {
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("a part is a string or {only, text}: %w", err)
			}
		}
		*t = append(*t, p)
	}
	return nil
}

// resolve is t as surface shows it: its parts for that surface, joined,
// with the surface's words for the placeholders ({exec} and the like).
// (No regexp: the agent links this package and should not pay for one.)
func (t text) resolve(surface string, words map[string]string) (string, error) {
	var in strings.Builder
	for _, p := range t {
		if p.Only == nil || slices.Contains(p.Only, surface) {
			in.WriteString(p.Text)
		}
	}
	s := in.String()
	var out strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			out.WriteString(s)
			return out.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("an unclosed placeholder in %q", s)
		}
		w, ok := words[s[i+1:i+j]]
		if !ok {
			return "", fmt.Errorf("unknown placeholder %s", s[i:i+j+1])
		}
		out.WriteString(s[:i])
		out.WriteString(w)
		s = s[i+j+1:]
	}
}

// AgentTools returns the agent tools as surface shows them, in
// tools.json's order: for the Python and TypeScript surfaces only the
// tools the SDKs have.
func AgentTools(surface string) ([]ToolText, error) {
	var f toolsFile
	if err := json.Unmarshal(AgentToolsJSON, &f); err != nil {
		return nil, fmt.Errorf("tools.json: %w", err)
	}
	words, ok := f.Surfaces[surface]
	if !ok {
		return nil, fmt.Errorf("tools.json: no surface %q", surface)
	}
	var params func(ps []paramJSON) ([]ParamText, error)
	params = func(ps []paramJSON) ([]ParamText, error) {
		var out []ParamText
		for _, p := range ps {
			if p.Only != nil && !slices.Contains(p.Only, surface) {
				continue
			}
			d, err := p.Description.resolve(surface, words)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			sub, err := params(p.Params)
			if err != nil {
				return nil, fmt.Errorf("%s.%w", p.Name, err)
			}
			out = append(out, ParamText{Name: p.Name, Description: d, Params: sub})
		}
		return out, nil
	}
	var tools []ToolText
	for _, t := range f.Tools {
		if surface != SurfaceMCP && t.SDK == "" {
			continue
		}
		summary, err := t.Summary.resolve(surface, words)
		if err != nil {
			return nil, fmt.Errorf("tools.json: %s: %w", t.MCP, err)
		}
		details, err := t.Details.resolve(surface, words)
		if err != nil {
			return nil, fmt.Errorf("tools.json: %s: %w", t.MCP, err)
		}
		if details != "" {
			summary += "\n\n" + details
		}
		ps, err := params(t.Params)
		if err != nil {
			return nil, fmt.Errorf("tools.json: %s: %w", t.MCP, err)
		}
		tools = append(tools, ToolText{MCPName: t.MCP, SDKName: t.SDK, Description: summary, Params: ps})
	}
	return tools, nil
}
