// Package readme runs the examples of the project's READMEs against a real
// server: every fenced shell, Python and TypeScript block of README.md,
// sdk/python/README.md and sdk/typescript/README.md, as a user would paste
// it. The parsing lives here and the running in readme_test.go.
//
// The conventions a README follows (all invisible once rendered):
//
//   - A block runs as written. An HTML comment on the line right before its
//     fence changes that:
//     <!-- example: skip REASON -->: not run; the reason is required and is
//     printed in the test's summary.
//     <!-- example: standin (WHY) -->: the model services the example asks
//     for are replaced by the project's scripted stand-ins (no network).
//     <!-- example: given NAME... (WHY) -->: the example uses names an
//     earlier passage of the text made (`sbx`, a sandbox; `my_agents`, a
//     local directory; see given in readme_test.go); the test makes them.
//     Several of those are joined by ";".
//   - The shell blocks of one file share one set of variables, as one
//     terminal would: `ID=$(withruntime sandbox create)` in one block is
//     `$ID` in the next.
//   - A comment "prints X" on a line (`# prints 42`, `// prints 42`) is
//     checked: the block's output must hold X, the word after "prints" or
//     the text between backquotes right after it.
package readme

import (
	"fmt"
	"regexp"
	"strings"
)

// Example is one fenced block of a README.
type Example struct {
	File string // relative to the checkout
	Line int    // of the opening fence, 1-based
	Lang string // "sh", "python" or "ts" (the kinds run); other fences are not examples
	Code string
	// What its marker says; all empty without one.
	Skip    string   // the reason not to run it
	Standin bool     // run with the scripted model stand-ins
	Given   []string // names the test makes before the block runs
	Marker  string   // the marker as written
}

func (e Example) String() string { return fmt.Sprintf("%s:%d (%s)", e.File, e.Line, e.Lang) }

// Expected is what the block's "prints" comments say its output holds.
func (e Example) Expected() []string {
	var out []string
	for _, m := range printsRe.FindAllStringSubmatch(e.Code, -1) {
		if m[1] != "" {
			out = append(out, m[1])
		} else {
			out = append(out, m[2])
		}
	}
	return out
}

var (
	fenceRe  = regexp.MustCompile("^(\\s*)```([A-Za-z]*)\\s*$")
	markerRe = regexp.MustCompile(`^\s*<!--\s*example:\s*(.*?)\s*-->\s*$`)
	printsRe = regexp.MustCompile("(?:#|//) .*?\\bprints (?:`([^`]+)`|([^\\s:,;]+))")
	langs    = map[string]string{
		"sh": "sh", "bash": "sh", "console": "sh", "shell": "sh",
		"python": "python", "py": "python",
		"ts": "ts", "typescript": "ts", "js": "ts", "javascript": "ts",
	}
)

// Parse returns the fenced blocks of a README in order, those of the kinds
// run (with Lang set) and the others (Lang empty), or an error for a marker
// that says nothing the test knows or a skip without its reason.
func Parse(file, text string) ([]Example, error) {
	lines := strings.Split(text, "\n")
	var out []Example
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, tag := m[1], strings.ToLower(m[2])
		start := i
		var body []string
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: the fence is never closed", file, start+1)
		}
		ex := Example{File: file, Line: start + 1, Lang: langs[tag], Code: strings.Join(body, "\n") + "\n"}
		if tag == "console" {
			// A console block shows commands after "$ " and their output:
			// the commands are the example.
			var cmds []string
			for _, l := range body {
				if c, ok := strings.CutPrefix(l, "$ "); ok {
					cmds = append(cmds, c)
				}
			}
			ex.Code = strings.Join(cmds, "\n") + "\n"
		}
		// The marker is the nearest line above the fence that is not blank.
		j := start - 1
		for j >= 0 && strings.TrimSpace(lines[j]) == "" {
			j--
		}
		if j >= 0 {
			if mm := markerRe.FindStringSubmatch(lines[j]); mm != nil {
				ex.Marker = mm[1]
				if err := ex.applyMarker(mm[1]); err != nil {
					return nil, fmt.Errorf("%s:%d: %v", file, j+1, err)
				}
			}
		}
		out = append(out, ex)
	}
	return out, nil
}

func (e *Example) applyMarker(m string) error {
	for _, part := range strings.Split(m, ";") {
		part = strings.TrimSpace(part)
		word, rest, _ := strings.Cut(part, " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "skip":
			if rest == "" {
				return fmt.Errorf("a skip marker needs its reason: <!-- example: skip REASON -->")
			}
			e.Skip = rest
		case "standin":
			e.Standin = true
		case "given":
			names, _, _ := strings.Cut(rest, "(")
			e.Given = strings.Fields(names)
			if len(e.Given) == 0 {
				return fmt.Errorf("a given marker names what it is given: <!-- example: given sbx -->")
			}
		default:
			return fmt.Errorf("unknown example marker %q (skip, standin, given)", word)
		}
	}
	return nil
}

// assignedRe finds the shell variables a block sets at the start of a line
// (ID=..., export ID=...), the ones the next blocks of its file may use.
var assignedRe = regexp.MustCompile(`(?m)^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=`)

// Assigned returns the shell variables a block sets.
func (e Example) Assigned() []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range assignedRe.FindAllStringSubmatch(e.Code, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			names = append(names, m[1])
		}
	}
	return names
}
