package templates

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
	"github.com/withruntime/withruntime/internal/template/build"
)

// agentClient talks to a build sandbox's agent through the manager's
// seam. The agent answers from inside the sandbox, where the build's
// steps run as root: everything read from it is bounded and checked.
type agentClient struct {
	l       *Library
	account string
	id      string
	// timeout bounds each command (0: none of its own).
	timeout time.Duration
}

// execRequest and execEvent are the agent's exec wire form
// (api.ExecRequest, api.ExecEvent), the fields a build uses: this package
// stays off the API's types.
type execRequest struct {
	Cmd  string            `json:"cmd"`
	Cwd  string            `json:"cwd,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	User string            `json:"user,omitempty"`
	// TimeoutMs ends the command past it (exit event timed_out).
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
}

type execEvent struct {
	Type     string `json:"type"`
	Data     string `json:"data"`
	DataB64  string `json:"data_b64"`
	ExitCode *int   `json:"exit_code"`
	TimedOut bool   `json:"timed_out"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// maxAgentLine bounds one line of the agent's exec stream.
const maxAgentLine = 4 << 20

func (a *agentClient) do(ctx context.Context, method, p string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	rt, err := a.l.sandboxes().Agent(ctx, a.account, a.id)
	if err != nil {
		return nil, err
	}
	u := &url.URL{Scheme: "http", Host: "sandbox-agent", Path: p, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("the sandbox's agent: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return nil, fmt.Errorf("the sandbox's agent answered %d: %s", resp.StatusCode, msg)
	}
	return resp, nil
}

// exec runs cmd with /bin/sh -c as user in cwd with env, passing its
// output to out as it comes, and returns its exit code.
func (a *agentClient) exec(ctx context.Context, cmd, user, cwd string, env map[string]string, out func(stream, data string)) (int, error) {
	body, _ := json.Marshal(execRequest{Cmd: cmd, Cwd: cwd, Env: env, User: user, TimeoutMs: a.timeout.Milliseconds()})
	resp, err := a.do(ctx, http.MethodPost, "/exec", nil, bytes.NewReader(body), "application/json")
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxAgentLine)
	for sc.Scan() {
		var ev execEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return -1, fmt.Errorf("the sandbox's agent sent a line that is not an exec event")
		}
		switch ev.Type {
		case "stdout", "stderr":
			data := ev.Data
			if ev.DataB64 != "" {
				b, err := base64.StdEncoding.DecodeString(ev.DataB64)
				if err != nil {
					return -1, fmt.Errorf("the sandbox's agent sent bad output")
				}
				data = strings.ToValidUTF8(string(b), "\uFFFD")
			}
			for out != nil && data != "" {
				n := min(len(data), maxLogLine)
				out(ev.Type, data[:n])
				data = data[n:]
			}
		case "exit":
			if ev.TimedOut {
				return -1, fmt.Errorf("timed out after %v (a step's bound)", a.timeout)
			}
			if ev.ExitCode == nil {
				return -1, fmt.Errorf("the command ended without an exit code")
			}
			return *ev.ExitCode, nil
		case "error":
			msg := "the command failed to run"
			if ev.Error != nil {
				msg = ev.Error.Message
			}
			return -1, errors.New(msg)
		}
	}
	if err := sc.Err(); err != nil {
		return -1, fmt.Errorf("reading the command's output: %w", err)
	}
	return -1, fmt.Errorf("the command's output ended without its exit")
}

// copy runs a copy step: the files of the context it takes go to a
// staging directory of the sandbox (the agent's archive upload, as root),
// get their owner and mode there, and are copied into place from it with
// cp -a, so that what was at the destination keeps its own owner and mode
// and only the copied entries get the step's.
func (s *stepRun) copy(ctx context.Context, ag *agentClient, c *build.Copy) error {
	src := strings.TrimSuffix(c.Src, "/")
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(src)
	if err != nil {
		return &stepFailed{fmt.Sprintf("step %d (copy %s %s): %s is not in the build context", s.n, c.Src, c.Dest, c.Src)}
	}
	stage := fmt.Sprintf("/tmp/.withruntime-build-%d", s.n)
	name := path.Base(src)
	if !strings.HasSuffix(c.Dest, "/") {
		name = path.Base(c.Dest)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		if fi.IsDir() {
			err = tarTree(tw, root, src)
		} else {
			err = tarEntry(tw, root, src, name, fi)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	resp, err := ag.do(ctx, http.MethodPut, "/archive", url.Values{"path": {stage}, "user": {build.UserRoot}}, pr, "application/x-tar")
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return s.copyFailed(c, err.Error())
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()

	owner := c.User
	if owner == "" {
		owner = s.user
	}
	if owner == "" {
		owner = build.UserDefault
	}
	q := build.Quote
	var sh strings.Builder
	fmt.Fprintf(&sh, "set -e\nS=%s\n", q(stage))
	if c.Mode != "" {
		fmt.Fprintf(&sh, "find \"$S\" -mindepth 1 ! -type l -exec chmod %s {} +\n", q(c.Mode))
	}
	if owner != build.UserRoot {
		fmt.Fprintf(&sh, "find \"$S\" -mindepth 1 -exec chown -h %s {} +\n", q(owner+":"))
	}
	switch {
	case fi.IsDir():
		fmt.Fprintf(&sh, "mkdir -p %s\ncd \"$S\"\nfind . -mindepth 1 -maxdepth 1 -exec cp -a {} %s \\;\n", q(c.Dest), q(strings.TrimSuffix(c.Dest, "/")+"/"))
	case strings.HasSuffix(c.Dest, "/"):
		fmt.Fprintf(&sh, "mkdir -p %s\ncp -a \"$S\"/%s %s\n", q(c.Dest), q(name), q(c.Dest))
	default:
		fmt.Fprintf(&sh, "mkdir -p %s\ncp -a \"$S\"/%s %s\n", q(path.Dir(c.Dest)), q(name), q(c.Dest))
	}
	sh.WriteString("cd /\nrm -rf \"$S\"\n")
	var out strings.Builder
	code, err := ag.exec(ctx, sh.String(), build.UserRoot, "", nil, func(_, data string) {
		if out.Len() < 4096 {
			out.WriteString(data)
		}
	})
	if err != nil {
		return s.copyFailed(c, err.Error())
	}
	if code != 0 {
		return s.copyFailed(c, fmt.Sprintf("exit %d: %s", code, strings.TrimSpace(out.String())))
	}
	return nil
}

func (s *stepRun) copyFailed(c *build.Copy, msg string) error {
	return &stepFailed{fmt.Sprintf("step %d (copy %s %s): %s", s.n, c.Src, c.Dest, msg)}
}

// tarTree writes what is beneath dir of root, names relative to dir.
// Symlinks are written as symlinks, never followed; the context was
// unpacked with only files, directories and links.
func tarTree(tw *tar.Writer, root *os.Root, dir string) error {
	return fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if dir == "." {
			rel = p
		}
		return tarEntry(tw, root, p, rel, fi)
	})
}

func tarEntry(tw *tar.Writer, root *os.Root, p, name string, fi fs.FileInfo) error {
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = root.Readlink(p); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = name
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	hdr.Format = tar.FormatPAX
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
		return err
	}
	return nil
}

// stopOrphans stops the live sandboxes of builds a previous process of
// this server ran: builds are in memory only, so none of them is
// finished by anyone. The manager re-attached them at its start.
func (l *Library) stopOrphans(ctx context.Context) {
	recs, err := l.cfg.Store.ListSandboxes(ctx, storeSandboxesAll)
	if err != nil {
		l.log.Warn("listing the sandboxes of interrupted builds", "err", err)
		return
	}
	for _, r := range recs {
		if r.State == sandbox.StateEnded || r.Spec.Metadata[BuildMeta] == "" {
			continue
		}
		if _, err := l.sandboxes().Stop(ctx, r.Account, r.ID); err != nil {
			l.log.Warn("stopping a sandbox of an interrupted build", "sandbox_id", r.ID, "build_id", r.Spec.Metadata[BuildMeta], "err", err)
			continue
		}
		l.log.Info("stopped a sandbox of an interrupted build", "sandbox_id", r.ID, "build_id", r.Spec.Metadata[BuildMeta])
	}
}
