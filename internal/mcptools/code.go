package mcptools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// RunCodeInput is sandbox_run_code's arguments: runtime_run_code's, with
// the sandbox.
type RunCodeInput struct {
	SandboxID      string `json:"sandbox_id"`
	Code           string `json:"code"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

// RunCodeOutput is runtime_run_code's result.
type RunCodeOutput struct {
	Results []string   `json:"results" jsonschema:"The cell's value and what it displayed, as text, each saying in which other formats it exists; PNG and JPEG images also come as image content."`
	Stdout  string     `json:"stdout" jsonschema:"The last 20000 characters of stdout, with a note when cut."`
	Stderr  string     `json:"stderr" jsonschema:"The last 20000 characters of stderr, with a note when cut."`
	Error   *CodeError `json:"error" jsonschema:"The exception the cell ended with (TimeoutError when interrupted at its timeout), or null."`
}

// CodeError is a cell's exception.
type CodeError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// maxImages bounds the images one answer carries: each may be megabytes.
const maxImages = 4

func (t tools) addCodeTools(s *mcp.Server) {
	mcp.AddTool(s, tool("sandbox_run_code", nil),
		func(ctx context.Context, req *mcp.CallToolRequest, in RunCodeInput) (*mcp.CallToolResult, RunCodeOutput, error) {
			c, err := t.clients(ctx, req)
			if err != nil {
				return nil, RunCodeOutput{}, toolError(err)
			}
			out, images, release, err := runCode(ctx, c, in)
			defer release()
			if err != nil {
				return nil, RunCodeOutput{}, toolError(err)
			}
			// The structured result as text first, as for the other tools,
			// then the images, which a client can show.
			b, err := json.Marshal(out)
			if err != nil {
				return nil, RunCodeOutput{}, toolError(err)
			}
			res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
			for _, im := range images {
				res.Content = append(res.Content, im)
			}
			return res, out, nil
		})
}

// runCode runs the cell; release gives back the reservation of the
// images, once the answer carrying them is made.
func runCode(ctx context.Context, c *client.Client, in RunCodeInput) (_ RunCodeOutput, _ []*mcp.ImageContent, release func(), _ error) {
	if err := needID(in.SandboxID); err != nil {
		return RunCodeOutput{}, nil, func() {}, err
	}
	timeoutMs, err := callTimeoutMs(in.TimeoutSeconds)
	if err != nil {
		return RunCodeOutput{}, nil, func() {}, err
	}
	// Output streams into bounded tails and results are kept as they come
	// only within the answer's budget: a cell that prints or displays
	// gigabytes costs the server no more than one that fits.
	var stdout, stderr tailWriter
	results := resultKeeper{out: []string{}, budget: OutputCap, reserve: func(n int64) (func(), error) {
		return c.Reserve(ctx, in.SandboxID, n)
	}}
	run, err := c.RunCode(ctx, in.SandboxID, api.CodeRequest{Code: in.Code, TimeoutMs: timeoutMs}, client.CodeOptions{
		Stdout: stdout.WriteString, Stderr: stderr.WriteString, Result: results.add, Discard: true,
	})
	if err != nil {
		results.release()
		return RunCodeOutput{}, nil, func() {}, err
	}
	out := RunCodeOutput{
		Results: results.list(),
		Stdout:  keepTail(string(stdout.buf), stdout.cut, OutputCap, "stdout"),
		Stderr:  keepTail(string(stderr.buf), stderr.cut, OutputCap, "stderr"),
	}
	if e := run.Error; e != nil {
		value := e.Value
		if e.Name == "TimeoutError" {
			value = inSeconds(value)
		}
		out.Error = &CodeError{Name: e.Name, Value: value, Traceback: keepTail(e.Traceback, false, OutputCap, "traceback")}
	}
	return out, results.images, results.release, nil
}

// resultKeeper keeps a cell's results as text while their text fits the
// budget (in characters), the first maxImages images, and a count of the
// results past the budget. Each image kept is reserved (reserve: its bytes
// and their base64 in the answer) until release; an image the server has
// no memory for is left out with a note.
type resultKeeper struct {
	out      []string
	images   []*mcp.ImageContent
	budget   int
	dropped  int
	reserve  func(n int64) (func(), error)
	releases []func()
	unkept   int // images refused a reservation
}

// release gives back the images' reservations.
func (k *resultKeeper) release() {
	for _, f := range k.releases {
		f()
	}
	k.releases = nil
}

func (k *resultKeeper) add(r api.CodeResult) {
	if k.budget <= 0 {
		k.dropped++
		return
	}
	s := strings.ToValidUTF8(r.Text, "\uFFFD")
	if i := headEnd(s, k.budget); i < len(s) {
		n := utf8.RuneCountInString(s)
		s = s[:i] + fmt.Sprintf("\n[result cut: only its first %d of %d characters are shown]", k.budget, n)
		k.budget = 0
	} else {
		k.budget -= utf8.RuneCountInString(s)
	}
	if formats := richFormats(r); len(formats) > 0 {
		if s != "" {
			s += "\n"
		}
		s += "[also as " + strings.Join(formats, ", ") + "]"
	}
	k.out = append(k.out, s)
	for _, im := range []struct{ data, mime string }{{r.PNG, "image/png"}, {r.JPEG, "image/jpeg"}} {
		if im.data == "" || len(k.images) == maxImages {
			continue
		}
		release := func() {}
		if k.reserve != nil {
			rel, err := k.reserve(2 * int64(len(im.data)))
			if err != nil {
				k.unkept++
				continue
			}
			release = rel
		}
		b, err := base64.StdEncoding.DecodeString(im.data)
		if err != nil {
			release()
			continue
		}
		k.images = append(k.images, &mcp.ImageContent{Data: b, MIMEType: im.mime})
		k.releases = append(k.releases, release)
	}
}

// list is the results kept, with a note of those left out.
func (k *resultKeeper) list() []string {
	out := k.out
	if k.dropped > 0 {
		out = append(out, fmt.Sprintf("[%d more results not shown]", k.dropped))
	}
	if k.unkept > 0 {
		out = append(out, fmt.Sprintf("[%d images not shown: the server's memory for sandbox answers is spent; retry once other calls end]", k.unkept))
	}
	return out
}

// richFormats names the formats a result has besides text, in the order
// the Python tool names them.
func richFormats(r api.CodeResult) []string {
	var f []string
	for _, x := range []struct {
		name string
		set  bool
	}{
		{"html", r.HTML != ""}, {"markdown", r.Markdown != ""}, {"svg", r.SVG != ""}, {"png", r.PNG != ""},
		{"jpeg", r.JPEG != ""}, {"latex", r.LaTeX != ""}, {"javascript", r.JavaScript != ""}, {"json", len(r.JSON) > 0},
	} {
		if x.set {
			f = append(f, x.name)
		}
	}
	return f
}

// timeoutMsWord is the API's name for a cell's timeout in the agent's
// message for a cell interrupted at it.
var timeoutMsWord = regexp.MustCompile(`\btimeout_ms=(\d+)`)

// inSeconds puts the kernel's timeout message in the tool's own terms: the
// model passed timeout_seconds, not the API's timeout_ms (as the SDKs'
// runtime_run_code does).
func inSeconds(value string) string {
	return timeoutMsWord.ReplaceAllStringFunc(value, func(m string) string {
		ms, err := strconv.ParseInt(timeoutMsWord.FindStringSubmatch(m)[1], 10, 64)
		if err != nil {
			return m
		}
		return "timeout_seconds=" + strconv.FormatFloat(float64(ms)/1000, 'g', -1, 64)
	})
}
