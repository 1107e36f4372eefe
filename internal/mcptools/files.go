package mcptools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// ReadFileInput is sandbox_read_file's arguments.
type ReadFileInput struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path"`
}

// ReadFileOutput is the file's text, as runtime_read_file returns it.
type ReadFileOutput struct {
	Content string `json:"content" jsonschema:"The file's text: its first 20000 bytes, with a note when cut; a note instead of a binary file's bytes; for a file that is not there, not found: PATH (no such file or directory)."`
}

// WriteFileInput is sandbox_write_file's arguments.
type WriteFileInput struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}

// WriteFileOutput says what was written.
type WriteFileOutput struct {
	Message string `json:"message" jsonschema:"What was written, as runtime_write_file says it."`
	Path    string `json:"path" jsonschema:"The file's absolute path in the sandbox."`
	Size    int64  `json:"size" jsonschema:"Bytes written."`
}

// ListFilesInput is sandbox_list_files's arguments.
type ListFilesInput struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path,omitempty"`
}

// Entry is one directory entry, as runtime_list_files gives it.
type Entry struct {
	Name string `json:"name"`
	Type string `json:"type" jsonschema:"file, dir, symlink or other; note for the line that says entries were left out, or that the directory is not there."`
	Size int64  `json:"size"`
}

// ListFilesOutput is a directory's entries, sorted by name.
type ListFilesOutput struct {
	Entries []Entry `json:"entries" jsonschema:"At most 400 entries, then a note saying how many more there are."`
}

func (t tools) addFileTools(s *mcp.Server) {
	add(s, t, tool("sandbox_read_file", &mcp.ToolAnnotations{ReadOnlyHint: true}), readFile)
	add(s, t, tool("sandbox_write_file", nil), writeFile)
	add(s, t, tool("sandbox_list_files", &mcp.ToolAnnotations{ReadOnlyHint: true}), listFiles)
}

func readFile(ctx context.Context, c *client.Client, in ReadFileInput) (ReadFileOutput, error) {
	if err := needID(in.SandboxID); err != nil {
		return ReadFileOutput{}, err
	}
	rc, err := c.OpenFile(ctx, in.SandboxID, in.Path)
	if err != nil {
		if missing, ok := notFound(ctx, c, in.SandboxID, in.Path, err); ok {
			return ReadFileOutput{Content: missing}, nil
		}
		return ReadFileOutput{}, err
	}
	defer rc.Close()
	// One byte more than the cap says whether there is more, without
	// transferring the rest.
	data, err := io.ReadAll(io.LimitReader(rc, OutputCap+1))
	if err != nil {
		return ReadFileOutput{}, err
	}
	more := len(data) > OutputCap
	data = data[:min(len(data), OutputCap)]
	size := func() string {
		if fi, err := c.StatFile(ctx, in.SandboxID, in.Path); err == nil {
			return fmt.Sprintf("%d bytes", fi.Size)
		}
		return "unknown size"
	}
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return ReadFileOutput{Content: fmt.Sprintf("[%s is a binary file (%s); use sandbox_exec with file, xxd or python3 to inspect it]", in.Path, size())}, nil
	}
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	if more {
		text += fmt.Sprintf("\n[cut: only the first %d bytes of %s are shown (%s in all); use sandbox_exec with tail or sed -n to read the rest]",
			len(data), in.Path, size())
	}
	return ReadFileOutput{Content: text}, nil
}

func writeFile(ctx context.Context, c *client.Client, in WriteFileInput) (WriteFileOutput, error) {
	if err := needID(in.SandboxID); err != nil {
		return WriteFileOutput{}, err
	}
	if in.Path == "" {
		return WriteFileOutput{}, invalid("path is empty")
	}
	fi, err := c.WriteFile(ctx, in.SandboxID, in.Path, strings.NewReader(in.Content), 0)
	if err != nil {
		return WriteFileOutput{}, err
	}
	path := fi.Path
	if path == "" {
		path = in.Path
	}
	size := int64(len(in.Content))
	return WriteFileOutput{Message: fmt.Sprintf("wrote %d bytes to %s", size, path), Path: path, Size: size}, nil
}

func listFiles(ctx context.Context, c *client.Client, in ListFilesInput) (ListFilesOutput, error) {
	if err := needID(in.SandboxID); err != nil {
		return ListFilesOutput{}, err
	}
	path := in.Path
	if path == "" {
		path = "."
	}
	infos, err := c.ListFiles(ctx, in.SandboxID, path)
	if err != nil {
		if missing, ok := notFound(ctx, c, in.SandboxID, path, err); ok {
			return ListFilesOutput{Entries: []Entry{{Name: missing, Type: "note"}}}, nil
		}
		return ListFilesOutput{}, err
	}
	slices.SortFunc(infos, func(a, b api.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	out := ListFilesOutput{Entries: []Entry{}}
	for _, fi := range infos[:min(len(infos), ListCap)] {
		out.Entries = append(out.Entries, Entry{Name: fi.Name, Type: fi.Type, Size: fi.Size})
	}
	if more := len(infos) - ListCap; more > 0 {
		out.Entries = append(out.Entries, Entry{Name: fmt.Sprintf("[%d more entries not shown]", more), Type: "note"})
	}
	return out, nil
}

// notFound returns the tool's answer when err says that p is not there
// in the sandbox: data the model reads and acts on (another path), as the
// SDKs' tools return it, not a failed call. The API answers not_found for
// a missing sandbox too: the sandbox is asked for, and only while it is
// there and not ended was it the path that was missing.
func notFound(ctx context.Context, c *client.Client, id, p string, err error) (string, bool) {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != client.CodeNotFound {
		return "", false
	}
	if sb, err := c.GetSandbox(ctx, id); err != nil || sb.State == "ended" {
		return "", false
	}
	if !path.IsAbs(p) {
		p = path.Join("/workspace", p)
	}
	return fmt.Sprintf("not found: %s (no such file or directory)", path.Clean(p)), true
}

// needID refuses an empty sandbox_id with the API's code for bad input.
func needID(id string) error {
	if id == "" {
		return invalid("sandbox_id is empty: pass the id sandbox_create returned")
	}
	return nil
}
