package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
	"github.com/withruntime/withruntime/internal/testenv"
)

// tmuxPane is one tmux window on a server of its own, running a command.
type tmuxPane struct {
	t      *testing.T
	socket string
	env    []string
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", p.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	p.tmux(append([]string{"send-keys", "-t", "pty"}, keys...)...)
}

// wait waits until the pane's text matches re, and returns the match.
func (p *tmuxPane) wait(re *regexp.Regexp, d time.Duration) []string {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		screen := p.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "pty")
		if m := re.FindStringSubmatch(screen); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the pane never showed %s; it shows:\n%s", re, screen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// size is the pane's size as tmux gives it to the program in it.
func (p *tmuxPane) size() string {
	return strings.TrimSpace(p.tmux("display-message", "-p", "-t", "pty", "#{pane_height} #{pane_width}"))
}

// TestShellUnderTmux drives "withruntime sandbox shell" in a real
// terminal: tmux runs it, types into it and reads its screen.
func TestShellUnderTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed (scripts/test.sh installs it)")
	}
	s := testenv.StartServer(t)
	env := s.Env()
	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "1024", "--timeout", "15m")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errs)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { cli(t, env, "sandbox", "stop", id) })

	codeFile := filepath.Join(t.TempDir(), "code")
	p := &tmuxPane{t: t, socket: fmt.Sprintf("wr-pty-%d", os.Getpid()), env: append(env, "TERM=xterm-256color")}
	// The pane outlives the CLI (sleep), so that its screen can still be
	// read; the CLI's exit code goes to a file.
	line := fmt.Sprintf("%s sandbox shell %s; echo $? > %s; sleep 600", testenv.CLI(t), id, codeFile)
	p.tmux("new-session", "-d", "-s", "pty", "-x", "100", "-y", "30", "sh", "-c", line)
	t.Cleanup(func() { exec.Command("tmux", "-L", p.socket, "kill-server").Run() })
	p.tmux("set-option", "-g", "status", "off")
	// The prompt (capture-pane drops a line's trailing blanks).
	p.wait(regexp.MustCompile(`(?m)[$#] ?$`), time.Minute)

	t.Run("stty size", func(t *testing.T) {
		p.t = t
		want := p.size()
		p.keys("stty size; echo size-$((20+1))", "Enter")
		m := p.wait(regexp.MustCompile(`(?m)^(\d+ \d+)\nsize-21$`), 20*time.Second)
		if m[1] != want {
			t.Fatalf("stty size says %q, the pane is %q", m[1], want)
		}
	})

	t.Run("the window resized", func(t *testing.T) {
		p.t = t
		p.tmux("resize-window", "-t", "pty", "-x", "132", "-y", "43")
		want := p.size()
		if want != "43 132" {
			t.Fatalf("tmux made the pane %q, want 43 132", want)
		}
		// SIGWINCH reaches the CLI, which resizes the sandbox's terminal.
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; ; i++ {
			p.keys(fmt.Sprintf("clear; stty size; echo resized-%d", i%10), "Enter")
			m := p.wait(regexp.MustCompile(fmt.Sprintf(`(?m)^(\d+ \d+)\nresized-%d$`, i%10)), 20*time.Second)
			if m[1] == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stty size says %q after the resize, want %q", m[1], want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("python3 interactively", func(t *testing.T) {
		p.t = t
		p.keys("clear; python3 -q", "Enter")
		p.wait(regexp.MustCompile(`(?m)^>>> ?$`), 30*time.Second)
		p.keys("print(6*7)", "Enter")
		p.wait(regexp.MustCompile(`(?m)^>>> print\(6\*7\)\n42\n>>> ?$`), 20*time.Second)
		p.keys("exit()", "Enter")
		p.keys("clear; echo py-$((1+2))", "Enter")
		p.wait(regexp.MustCompile(`(?m)^py-3$`), 20*time.Second)
	})

	t.Run("Ctrl-C interrupts sleep", func(t *testing.T) {
		p.t = t
		p.keys("clear; sleep 100; echo slept", "Enter")
		time.Sleep(time.Second)
		start := time.Now()
		p.keys("C-c")
		p.keys("echo back-$((4+5))", "Enter")
		p.wait(regexp.MustCompile(`(?m)^back-9$`), 20*time.Second)
		if time.Since(start) > 30*time.Second {
			t.Fatalf("Ctrl-C took %s", time.Since(start))
		}
		all := p.tmux("capture-pane", "-p", "-J", "-t", "pty")
		if strings.Contains(all, "\nslept") {
			t.Fatalf("sleep was not interrupted:\n%s", all)
		}
	})

	t.Run("exec -t without a terminal here", func(t *testing.T) {
		// As docker exec -t: a terminal there (80x24, CRLF), nothing sent.
		out, errs, code := cli(t, env, "sandbox", "exec", "-t", id, "--", "sh", "-c", "tty; stty size; exit 4")
		if code != 4 || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "24 80\r\n") {
			t.Fatalf("got %q (stderr %q) exit %d, want a /dev/pts terminal, 24 80 with CRLF and exit 4", out, errs, code)
		}
		_, errs, code = cli(t, env, "sandbox", "exec", "-it", id, "--", "sh")
		if code != 2 || !strings.Contains(errs, "not a terminal") {
			t.Fatalf("-it without a terminal: got exit %d, stderr %q", code, errs)
		}
	})

	t.Run("the WebSocket, attached again", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		dial := func(query string) *websocket.Conn {
			conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/v1/sandboxes/"+id+"/pty?"+query, &websocket.DialOptions{
				HTTPHeader: http.Header{"Authorization": {"Bearer " + s.Key}},
			})
			if err != nil {
				t.Fatalf("dialing ?%s: %v (%+v)", query, err, resp)
			}
			return conn
		}
		// read reads until the output holds want; it returns the output and
		// the control messages.
		read := func(conn *websocket.Conn, want string) (string, []api.PtyMessage) {
			var out strings.Builder
			var msgs []api.PtyMessage
			for want == "" || !strings.Contains(out.String(), want) {
				typ, b, err := conn.Read(ctx)
				if err != nil {
					if want == "" {
						break
					}
					t.Fatalf("waiting for %q: %v; got %q", want, err, out.String())
				}
				if typ == websocket.MessageBinary {
					out.Write(b)
					continue
				}
				var m api.PtyMessage
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
			}
			return out.String(), msgs
		}
		conn := dial("cmd=python3&cmd=-q&cols=90&rows=25")
		_, msgs := read(conn, ">>> ")
		if len(msgs) == 0 || msgs[0].Type != api.PtyMsgStart || msgs[0].PtyID == 0 {
			t.Fatalf("got messages %+v, want start with a pty_id first", msgs)
		}
		conn.Write(ctx, websocket.MessageBinary, []byte("import shutil; print(shutil.get_terminal_size())\r"))
		read(conn, "columns=90, lines=25")
		conn.CloseNow() // dropped: python keeps running
		conn = dial(fmt.Sprintf("pty_id=%d", msgs[0].PtyID))
		read(conn, "columns=90, lines=25") // the kept output, again
		conn.Write(ctx, websocket.MessageText, []byte(`{"type":"resize","cols":70,"rows":20}`))
		conn.Write(ctx, websocket.MessageBinary, []byte("print(shutil.get_terminal_size())\r"))
		read(conn, "columns=70, lines=20")
		conn.Write(ctx, websocket.MessageBinary, []byte("raise SystemExit(6)\r"))
		_, msgs = read(conn, "")
		if last := msgs[len(msgs)-1]; last.Type != api.PtyMsgExit || last.ExitCode == nil || *last.ExitCode != 6 {
			t.Fatalf("got messages %+v, want exit 6 last", msgs)
		}
	})

	t.Run("exit 3 is the CLI's exit code", func(t *testing.T) {
		p.t = t
		p.keys("exit 3", "Enter")
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, err := os.ReadFile(codeFile)
			if err == nil && strings.TrimSpace(string(b)) != "" {
				if got := strings.TrimSpace(string(b)); got != "3" {
					t.Fatalf("the CLI exited %s, want 3", got)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the CLI did not exit; the pane shows:\n%s", p.tmux("capture-pane", "-p", "-t", "pty"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// TestPtyMicroVM: the microVM tier's guest has terminals too (its init
// mounts devpts): exec -t there has a /dev/pts terminal of 80x24 and the
// command's exit code, and the terminal's size follows a resize.
func TestPtyMicroVM(t *testing.T) {
	// One guest for both of the microVM tier's ways in: a terminal, and a
	// preview URL (further down).
	testenv.RequiresMicroVM(t)
	s := testenv.StartServer(t, "--isolation", "microvm", "--microvm-accel", "tcg", "--overcommit", "16")
	env := s.Env()
	out, errs, code := cli(t, env, "sandbox", "create", "--vcpus", "1", "--memory", "1024", "--timeout", "15m")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errs)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { cli(t, env, "sandbox", "stop", id) })
	out, errs, code = cli(t, env, "sandbox", "exec", "-t", id, "--", "sh", "-c", "tty; stty size; exit 4")
	if code != 4 || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "24 80\r\n") {
		t.Fatalf("got %q (stderr %q) exit %d, want a /dev/pts terminal, 24 80 and exit 4", out, errs, code)
	}
	c, err := client.New(client.WithBaseURL(s.URL), client.WithAPIKey(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.OpenPTY(t.Context(), id, client.PTYOptions{Cmd: []string{"sh"}, Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Resize(t.Context(), 120, 40); err != nil {
		t.Fatal(err)
	}
	p.Write([]byte("stty size; exit 5\n"))
	b, _ := io.ReadAll(p)
	if code, err := p.Wait(t.Context()); err != nil || code != 5 || !strings.Contains(string(b), "40 120") {
		t.Fatalf("got %q, exit %d, %v; want 40 120 and exit 5", b, code, err)
	}

	// A preview URL in the same guest: a server bound to the guest's
	// loopback, reached through the agent's link (yamux over
	// virtio-serial), and a closed port's 502.
	if _, err := c.StartProcess(t.Context(), id, api.ExecRequest{
		Cmd:        api.Command{Shell: "mkdir -p /tmp/site && echo microvm-preview > /tmp/site/index.html && cd /tmp/site && exec python3 -m http.server 8000 --bind 127.0.0.1"},
		Background: true,
	}); err != nil {
		t.Fatal(err)
	}
	get := func(port string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL+"/v1/sandboxes/"+id+"/ports/"+port+"/index.html", nil)
		req.Header.Set("Authorization", "Bearer "+s.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	deadline := time.Now().Add(2 * time.Minute)
	status, body := get("8000")
	for status != http.StatusOK && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		status, body = get("8000")
	}
	if status != http.StatusOK || !strings.Contains(body, "microvm-preview") {
		t.Fatalf("preview of port 8000: %d %q", status, body)
	}
	if status, body := get("8001"); status != http.StatusBadGateway || !strings.Contains(body, "bad_gateway") {
		t.Errorf("preview of a closed port: %d %q, want 502 bad_gateway", status, body)
	}
}
