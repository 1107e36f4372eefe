package e2bcompat

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// E2B's build start (TemplateBuildStartV2) as withruntime's build
// specification (POST /v1/templates): the steps one for one, each copy
// step's uploaded files placed in the build context under a directory of
// their own.

// buildStart is the body of POST /v2/templates/{templateID}/builds/{buildID}.
type buildStart struct {
	FromImage         string          `json:"fromImage"`
	FromTemplate      string          `json:"fromTemplate"`
	FromImageRegistry json.RawMessage `json:"fromImageRegistry"`
	Force             bool            `json:"force"`
	Steps             []e2bStep       `json:"steps"`
	StartCmd          string          `json:"startCmd"`
	ReadyCmd          string          `json:"readyCmd"`
}

// e2bStep is one of E2B's instructions: its type and positional args.
type e2bStep struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	Force     bool     `json:"force"`
	FilesHash string   `json:"filesHash"`
}

// wireStep is a step of withruntime's build specification, as its JSON.
type wireStep struct {
	Run     string            `json:"run,omitempty"`
	User    string            `json:"user,omitempty"`
	Copy    *wireCopy         `json:"copy,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	NoCache bool              `json:"no_cache,omitempty"`
}

type wireCopy struct {
	Src  string `json:"src"`
	Dest string `json:"dest"`
	User string `json:"user,omitempty"`
	Mode string `json:"mode,omitempty"`
}

// wireSpec is withruntime's build specification.
type wireSpec struct {
	Name      string      `json:"name"`
	From      wireFrom    `json:"from"`
	Steps     []wireStep  `json:"steps,omitempty"`
	StartCmd  string      `json:"start_cmd,omitempty"`
	ReadyCmd  string      `json:"ready_cmd,omitempty"`
	VCPUs     int         `json:"vcpus,omitempty"`
	MemoryMiB int         `json:"memory_mib,omitempty"`
	Network   wireNetwork `json:"network"`
	NoCache   bool        `json:"no_cache,omitempty"`
}

type wireFrom struct {
	Template string `json:"template,omitempty"`
	Image    string `json:"image,omitempty"`
}

type wireNetwork struct {
	Internet bool `json:"internet"`
}

// e2bBaseImages are E2B's own base image, which withruntime's built-in
// image stands for (E2B's default template is built from it).
var e2bBaseImages = map[string]bool{"e2bdev/base": true, "e2bdev/base:latest": true, "docker.io/e2bdev/base": true, "docker.io/e2bdev/base:latest": true}

// contextDir is where copy step n's files are in the build context.
func contextDir(n int) string { return fmt.Sprintf("e2b/%d", n) }

// copySource is what copy step n copies of its files, src as E2B's
// client gave it: the uploaded archive names the files by their path in
// the client's context, which contextDir(n) prefixes, and holds only src
// (clean: src cleaned); a glob (the client matched it and sent what
// matched) copies what it matched, each named below the glob's first
// fixed directories (strip), as Docker's COPY does.
func copySource(n int, src string) (from, clean, strip string, err error) {
	clean = path.Clean(strings.TrimPrefix(src, "./"))
	if !fs.ValidPath(clean) || strings.HasPrefix(src, "/") {
		return "", "", "", fmt.Errorf("the source %q is not a path inside the build's context", src)
	}
	parts := strings.Split(clean, "/")
	for i, p := range parts {
		if strings.ContainsAny(p, "*?[") {
			return contextDir(n), "", strings.Join(parts[:i], "/"), nil
		}
	}
	return contextDir(n) + "/" + clean, clean, "", nil
}

// spec is withruntime's build specification for b, named ref, of size
// cpu and memory (0: the base's).
func (b *buildStart) spec(ref string, cpu, memoryMiB int) (*wireSpec, []copyFiles, error) {
	if given(b.FromImageRegistry) {
		return nil, nil, unsupported("a base image from a registry that needs credentials (fromImageRegistry)")
	}
	s := &wireSpec{Name: ref, StartCmd: b.StartCmd, ReadyCmd: b.ReadyCmd, VCPUs: cpu, MemoryMiB: memoryMiB, NoCache: b.Force}
	// E2B's builds reach the internet (apt, pip and npm steps need it):
	// so do these, within the account's own network policy.
	s.Network.Internet = true
	switch {
	case b.FromTemplate != "" && b.FromImage != "":
		return nil, nil, badBuild("give fromTemplate or fromImage, not both")
	case b.FromTemplate != "":
		s.From.Template = b.FromTemplate
		if templates[b.FromTemplate] {
			s.From.Template = "default"
		}
	case b.FromImage == "" || e2bBaseImages[b.FromImage]:
		s.From.Template = "default"
	default:
		s.From.Image = b.FromImage
	}
	var copies []copyFiles
	for i, st := range b.Steps {
		n := i + 1
		ws := wireStep{NoCache: st.Force}
		arg := func(k int) string {
			if k < len(st.Args) {
				return st.Args[k]
			}
			return ""
		}
		switch st.Type {
		case "RUN":
			if len(st.Args) < 1 || len(st.Args) > 2 || st.Args[0] == "" {
				return nil, nil, badBuild("step %d: RUN takes a command and, optionally, a user", n)
			}
			ws.Run, ws.User = arg(0), arg(1)
		case "COPY":
			if len(st.Args) < 2 || len(st.Args) > 4 || arg(0) == "" || arg(1) == "" {
				return nil, nil, badBuild("step %d: COPY takes a source, a destination, and optionally a user and a mode", n)
			}
			if !filesHash.MatchString(st.FilesHash) {
				return nil, nil, badBuild("step %d: COPY needs the filesHash of its files (64 hex digits)", n)
			}
			from, src, strip, err := copySource(n, arg(0))
			if err != nil {
				return nil, nil, badBuild("step %d: %v", n, err)
			}
			ws.Copy = &wireCopy{Src: from, Dest: arg(1), User: arg(2), Mode: arg(3)}
			copies = append(copies, copyFiles{step: n, hash: st.FilesHash, src: src, strip: strip})
		case "ENV":
			if len(st.Args) == 0 || len(st.Args)%2 != 0 {
				return nil, nil, badBuild("step %d: ENV takes names and values in pairs", n)
			}
			ws.Env = map[string]string{}
			for k := 0; k < len(st.Args); k += 2 {
				ws.Env[st.Args[k]] = st.Args[k+1]
			}
		case "WORKDIR":
			if len(st.Args) != 1 || arg(0) == "" {
				return nil, nil, badBuild("step %d: WORKDIR takes one path", n)
			}
			ws.Workdir = arg(0)
		case "USER":
			if len(st.Args) != 1 || arg(0) == "" {
				return nil, nil, badBuild("step %d: USER takes one name", n)
			}
			ws.User = arg(0)
		default:
			return nil, nil, badBuild("step %d: the instruction %q is not one withruntime builds (RUN, COPY, ENV, WORKDIR, USER)", n, st.Type)
		}
		s.Steps = append(s.Steps, ws)
	}
	return s, copies, nil
}

// copyFiles is a copy step's upload: what of it goes where in the
// context.
type copyFiles struct {
	step int
	hash string
	// src is the path copied (its entries are it or below it), or, for a
	// glob, strip the directories its matches are named below.
	src, strip string
}

func badBuild(format string, a ...any) error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, a...)}
}

// writeContext writes the build context of copies as one tar to w: each
// step's uploaded archive (gzipped or not) with every entry renamed under
// contextDir(step). Names that would leave their directory are refused
// here; everything else about the entries (sizes, links, kinds) the API
// checks as it does any build context.
func writeContext(w io.Writer, up *uploads, account string, copies []copyFiles) error {
	tw := tar.NewWriter(w)
	for _, c := range copies {
		if err := appendUpload(tw, up, account, c); err != nil {
			return err
		}
	}
	return tw.Close()
}

func appendUpload(tw *tar.Writer, up *uploads, account string, c copyFiles) error {
	f, err := up.open(account, c.hash)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return badBuild("step %d: its files (hash %s) were not uploaded before the build started", c.step, c.hash)
		}
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return badBuild("step %d: its uploaded files are not a gzipped tar: %v", c.step, err)
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	dir := contextDir(c.step)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return badBuild("step %d: its uploaded files are not a tar: %v", c.step, err)
		}
		name, ok := below(h.Name, c.strip)
		if !ok && h.Typeflag == tar.TypeDir && ancestor(h.Name, c.strip) {
			continue // a directory the glob's files are below: not copied
		}
		if ok && c.src != "" && name != c.src && !strings.HasPrefix(name, c.src+"/") {
			ok = false
		}
		if !ok {
			return badBuild("step %d: the uploaded entry %q is not inside the copy's source", c.step, h.Name)
		}
		h.Name = dir + "/" + name
		if h.Typeflag == tar.TypeLink {
			// A hard link names an earlier entry of the same archive.
			link, ok := below(h.Linkname, c.strip)
			if !ok {
				return badBuild("step %d: the uploaded hard link %q leads outside the copy's source", c.step, h.Name)
			}
			h.Linkname = dir + "/" + link
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return badBuild("step %d: reading its uploaded files: %v", c.step, err)
		}
	}
}

// below is name relative to dir ("" the whole context), when it is a
// local path inside it.
func below(name, dir string) (string, bool) {
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if !fs.ValidPath(clean) || clean == "." || strings.HasPrefix(name, "/") {
		return "", false
	}
	if dir == "" {
		return clean, true
	}
	rest, ok := strings.CutPrefix(clean, dir+"/")
	return rest, ok && rest != ""
}

// ancestor says whether name is dir or a directory above it.
func ancestor(name, dir string) bool {
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	return dir != "" && (clean == dir || clean == "." || strings.HasPrefix(dir, clean+"/"))
}
