package agent

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/withruntime/withruntime/api"
)

// A terminal is a background process whose stdin, stdout and stderr are
// the replica side of a pseudo-terminal the agent opens; the agent holds the
// primary side. It is a background process like any other (listed, followed
// with GET .../stream, written to with POST .../stdin, killed, waited for),
// with three differences: its output is one stream (stdout) of raw
// terminal bytes of which the last api.PtyOutputKept are kept for a client
// that attaches again; POST .../resize changes its size; and it leads a
// session of its own with the terminal as its controlling terminal, so
// that the terminal's line discipline sends ^C as SIGINT to whatever runs
// in the foreground, as on any terminal.

// ptyStartMu serializes starting terminals, so that the bound on running
// terminals holds under concurrent requests.
var ptyStartMu sync.Mutex

// preparePty fills in what a terminal request leaves out (the user's login
// shell) and checks what it must not combine with.
func (s *Server) preparePty(req *api.ExecRequest) (login bool, err error) {
	if err := req.Pty.Check(); err != nil {
		return false, invalidf("pty: %v", err)
	}
	switch {
	case !req.Background:
		return false, invalidf("pty needs background: a terminal is attached to with GET .../processes/{pid}/stream and .../stdin")
	case req.Stdin != "":
		return false, invalidf("stdin and pty exclude each other: send input with POST .../processes/{pid}/stdin")
	}
	if req.Cmd.Empty() {
		user, err := s.identity(req.User)
		if err != nil {
			return false, err
		}
		req.Cmd = api.Command{Argv: []string{loginShell(user.uid)}}
		login = true
	}
	req.KeepStdin = true
	return login, nil
}

// loginShell is the shell /etc/passwd gives uid, or bash, or sh.
func loginShell(uid int) string {
	if f, err := os.Open("/etc/passwd"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) == 7 && fields[2] == strconv.Itoa(uid) && filepath.IsAbs(fields[6]) {
				if fi, err := os.Stat(fields[6]); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
					return fields[6]
				}
				break
			}
		}
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// hasVar reports whether env ("NAME=value" entries) sets name.
func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// startPty starts l on a new terminal of the given size and keeps it in the
// process table, answering as startBackground does.
func (s *Server) startPty(w http.ResponseWriter, l *launch, size api.PtySize, login bool) error {
	if l.notRunnable != nil {
		return s.startBackground(w, l) // answers with the ended process
	}
	if login {
		// A leading "-" in argv[0] is how login(1) asks a shell to read
		// the login files (the profile that sets the prompt and PATH).
		l.argv = append([]string{"-" + filepath.Base(l.argv[0])}, l.argv[1:]...)
	}
	if !hasVar(l.env, "TERM") {
		// What a terminal emulator would say; the client's own TERM, sent
		// in env, wins.
		l.env = append(l.env, "TERM=xterm-256color")
	}
	ptyStartMu.Lock()
	defer ptyStartMu.Unlock()
	if n := s.procs.runningPtys(); n >= api.MaxPtys {
		return conflictf("%d terminals run in this sandbox, the most there may be: end one first", n)
	}
	p, err := s.spawnPty(l, size)
	if err != nil {
		return err
	}
	s.procs.add(p)
	writeJSON(w, http.StatusCreated, p.info())
	return nil
}

// unignoreOnce makes sure terminals get ^C and ^\ (unignoreInterrupts).
var unignoreOnce sync.Once

// unignoreInterrupts undoes an ignored SIGINT or SIGQUIT the agent was
// started with (as a program started in the background of a shell is):
// an ignored signal stays ignored across exec, so a terminal's ^C would
// reach no one. A handler of the Go runtime's instead (the signals are
// dropped here, as before) is reset to the default in every child.
func unignoreInterrupts() {
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGQUIT} {
		if signal.Ignored(sig) {
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
}

// spawnPty starts l on a new terminal.
func (s *Server) spawnPty(l *launch, size api.PtySize) (*proc, error) {
	unignoreOnce.Do(unignoreInterrupts)
	primary, replica, err := pty.Open()
	if err != nil {
		return nil, err
	}
	if err := pty.Setsize(primary, &pty.Winsize{Cols: uint16(size.Cols), Rows: uint16(size.Rows)}); err != nil {
		primary.Close()
		replica.Close()
		return nil, err
	}
	// The terminal belongs to whom it serves, as login(1) makes it: tools
	// that open it by name (mesg, write, some prompts) can.
	_ = replica.Chown(l.user.uid, l.user.gid)
	// Input goes through a file of its own: closing it (POST
	// .../stdin?close=true, or the end) never cuts the output.
	in, err := dupFile(primary)
	if err != nil {
		primary.Close()
		replica.Close()
		return nil, err
	}
	attr := s.sysProcAttrAs(l.user.uid, l.user.gid)
	// A session of its own (its pid is its group's too, as Setpgid gives
	// other commands) with the terminal, fd 0, as controlling terminal.
	attr.Setpgid = false
	attr.Setsid = true
	attr.Setctty = true
	attr.Ctty = 0
	c := &exec.Cmd{
		Path:        l.path,
		Args:        l.argv,
		Dir:         l.dir,
		Env:         l.env,
		Stdin:       replica,
		Stdout:      replica,
		Stderr:      replica,
		SysProcAttr: attr,
	}
	err = s.reaper.start(c)
	replica.Close()
	if err != nil {
		primary.Close()
		in.Close()
		return nil, startFailure(l.argv[0], err)
	}
	p := newProc(c.Process.Pid, l, in)
	p.stdout, p.stderr, p.pty = newTail(api.PtyOutputKept), newTail(0), primary
	go p.waitPty(c, s.reaper)
	return p, nil
}

// dupFile is a second file for f's open file (and so its poller mode).
func dupFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// waitPty is wait for a terminal: one output, read as raw bytes.
func (p *proc) waitPty(c *exec.Cmd, reaper *orphanReaper) {
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		// Ends at EIO, once no process holds the replica open any more. A
		// UTF-8 character is never split across two chunks, as with every
		// stream's output (api.ExecEvent).
		pump(p.pty, p.ringing(p.stdout.write))
	}()
	_ = c.Wait()
	reaper.waited(p.pid)
	close(p.exited)
	if p.timer != nil {
		p.timer.Stop()
	}
	// Descendants left running may hold the terminal open forever.
	_ = p.pty.SetReadDeadline(time.Now().Add(outputGrace))
	<-pumped
	p.closeStdin()
	p.ptyMu.Lock()
	p.pty.Close()
	p.ptyClosed = true
	p.ptyMu.Unlock()
	p.finish(c)
}

// handleProcessResize sets a terminal's size; its foreground process gets
// SIGWINCH from the terminal.
func (s *Server) handleProcessResize(w http.ResponseWriter, r *http.Request) error {
	var size api.PtySize
	if err := decodeJSON(w, r, &size); err != nil {
		return err
	}
	if err := size.Check(); err != nil {
		return invalidf("%v", err)
	}
	p, err := s.lookup(r)
	if err != nil {
		return err
	}
	if p.pty == nil {
		return conflictf("process %d has no terminal: start it with pty", p.pid)
	}
	p.ptyMu.Lock()
	defer p.ptyMu.Unlock()
	if p.ptyClosed {
		return conflictf("process %d has ended", p.pid)
	}
	if err := pty.Setsize(p.pty, &pty.Winsize{Cols: uint16(size.Cols), Rows: uint16(size.Rows)}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// runningPtys counts the terminals whose process has not ended.
func (t *procTable) runningPtys() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.byPid {
		if p.pty == nil {
			continue
		}
		select {
		case <-p.done:
		default:
			n++
		}
	}
	return n
}
