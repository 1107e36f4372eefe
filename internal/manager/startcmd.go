package manager

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// maxReadyOutput bounds what a try of the ready command may print that the
// manager reads (it keeps only its tail, for the error).
const maxReadyOutput = 1 << 20

// startTemplate starts what a sandbox's template asks for once it is up:
// its start command in the background, then its ready command, tried
// until it exits 0 or the template's ready timeout passes. The create
// answers only after that, so a sandbox of a web app's template is
// serving when the caller gets it.
func (m *Manager) startTemplate(ctx context.Context, e *entry, spec sandbox.Spec) error {
	if spec.StartCmd != "" {
		status, body, err := m.agentExec(ctx, e, spec.StartCmd, true, 0)
		if err != nil {
			return fmt.Errorf("starting the template's start command: %w", err)
		}
		if status != http.StatusCreated {
			return sandbox.Errorf(sandbox.KindInvalid, "the template's start command was refused: %s", tail(body))
		}
	}
	if spec.ReadyCmd == "" {
		return nil
	}
	deadline := time.Now().Add(spec.ReadyTimeout)
	var last string
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "the template's ready command did not succeed within %s; its last try: %s", spec.ReadyTimeout, last)
		}
		try := min(left, readyTry)
		status, body, err := m.agentExec(ctx, e, spec.ReadyCmd, false, try)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			last = err.Error()
		} else if code, ok := exitCode(body); status == http.StatusOK && ok && code == 0 {
			return nil
		} else {
			last = fmt.Sprintf("exit %d: %s", code, tail(body))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// agentExec runs a shell command in the sandbox through its agent, as the
// sandbox's default user in its default directory, and returns the
// answer (bounded).
func (m *Manager) agentExec(ctx context.Context, e *entry, cmd string, background bool, timeout time.Duration) (int, []byte, error) {
	var c any = cmd
	if argv, ok := words(cmd); ok {
		// A plain list of words runs without a shell: an image may have
		// none (its entrypoint and command are such a list).
		c = argv
	}
	body, err := json.Marshal(map[string]any{"cmd": c, "background": background, "timeout_ms": timeout.Milliseconds()})
	if err != nil {
		return 0, nil, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout+5*time.Second)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/exec", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.transport.RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxReadyOutput))
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, out, err
}

// exitCode finds the exit event of an exec's NDJSON answer.
func exitCode(ndjson []byte) (int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(ndjson))
	sc.Buffer(nil, maxReadyOutput)
	for sc.Scan() {
		var ev struct {
			Type     string `json:"type"`
			ExitCode *int   `json:"exit_code"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "exit" && ev.ExitCode != nil {
			return *ev.ExitCode, true
		}
	}
	return -1, false
}

// tail is the end of an agent's answer, for an error message.
func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = "..." + s[len(s)-500:]
	}
	return s
}

// words splits a command that is only words, each plain (letters, digits
// and _ - . / : = @ % + ,) or in single quotes ('\” for a quote inside),
// as a shell would; anything else (a variable, a pipe, a glob...) is not
// such a command and needs the shell.
func words(cmd string) ([]string, bool) {
	var out []string
	var w strings.Builder
	in, quoted := false, false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quoted:
			if c == '\'' {
				quoted = false
			} else {
				w.WriteByte(c)
			}
		case c == '\'':
			quoted, in = true, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		case c == '\\' && strings.HasPrefix(cmd[i:], "\\'"):
			w.WriteByte('\'')
			in = true
			i++
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_-./:=@%+,", c) >= 0:
			w.WriteByte(c)
			in = true
		default:
			return nil, false
		}
	}
	if quoted {
		return nil, false
	}
	if in {
		out = append(out, w.String())
	}
	return out, len(out) > 0
}
