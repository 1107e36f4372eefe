package agent

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/withruntime/withruntime/api"
)

// outputGrace is how long output is still read after a command exits:
// descendants it left running may hold its pipes open forever.
const outputGrace = 200 * time.Millisecond

// proc is one started command.
type proc struct {
	pid     int
	cmd     api.Command
	tag     string
	started time.Time
	exited  chan struct{} // closed once the command itself has been reaped
	done    chan struct{} // closed once its output is drained and its end recorded

	timedOut atomic.Bool
	timer    *time.Timer // the timeout, if any

	stdout, stderr *tail // nil for a foreground command
	bell           bell  // rung after each chunk of output and at the end
	cwd, user      string

	writeMu sync.Mutex // held across a write to stdin, so writes never interleave
	stdinMu sync.Mutex // guards stdin, never held across a write
	stdin   *os.File   // the write end of a keep_stdin pipe; nil once closed

	mu       sync.Mutex // guards exitCode and ended
	exitCode *int
	ended    time.Time
}

// start starts l. onStart runs once the process exists and before any of
// its output is passed to onOut or onErr. A command that cannot start
// yields a *notRunnable error.
func (s *Server) start(l *launch, onStart func(pid int), onOut, onErr func([]byte)) (*proc, error) {
	if l.notRunnable != nil {
		return nil, l.notRunnable
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	// stdin is /dev/null, the request's data through a pipe, or a pipe
	// kept open for later writes (background processes only).
	inR, inW, err := stdinFor(l)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, err
	}
	pid, err := s.reaper.forkExec(l.path, l.argv, &syscall.ProcAttr{
		Dir:   l.dir,
		Env:   l.env,
		Files: []uintptr{inR.Fd(), outW.Fd(), errW.Fd()},
		Sys:   s.sysProcAttrAs(l.user.uid, l.user.gid),
	})
	if inR != devNull {
		inR.Close()
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return nil, startFailure(l.argv[0], err)
	}
	var feed *os.File // the write end of the request's stdin, being written
	if l.stdin != "" {
		feed, inW = inW, nil
		go func() {
			// A command that exits unread gets EPIPE: no failure; once
			// wait closes the pipe the write ends too.
			_, _ = feed.WriteString(l.stdin)
			feed.Close()
		}()
	}
	p := &proc{
		pid:     pid,
		cmd:     l.cmd,
		tag:     l.tag,
		started: time.Now().UTC(),
		exited:  make(chan struct{}),
		done:    make(chan struct{}),
		cwd:     l.dir,
		user:    l.user.name,
		stdin:   inW,
	}
	if l.timeout > 0 {
		p.timer = time.AfterFunc(l.timeout, p.expire)
	}
	if onStart != nil {
		onStart(p.pid)
	}
	go p.wait(outR, errR, feed, p.ringing(onOut), p.ringing(onErr), s.reaper)
	return p, nil
}

// stdinGrace bounds how long the request's stdin is still written once the
// command has exited: a descendant may hold stdin and never read it.
const stdinGrace = time.Second

// devNull is every command's stdin when it is given none; opened once,
// never closed.
var devNull = func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
}()

// stdinFor is the read end the command gets as stdin, and the write end
// the agent keeps, if any.
func stdinFor(l *launch) (r, w *os.File, err error) {
	if !l.keepStdin && l.stdin == "" {
		if devNull == nil {
			return nil, nil, fmt.Errorf("opening %s failed at start", os.DevNull)
		}
		return devNull, nil, nil
	}
	return os.Pipe()
}

// ringing is emit, then a ring of p's bell for those following p's output.
func (p *proc) ringing(emit func([]byte)) func([]byte) {
	return func(b []byte) {
		emit(b)
		p.bell.ring()
	}
}

func (s *Server) sysProcAttr() *syscall.SysProcAttr {
	return s.sysProcAttrAs(s.cfg.UID, s.cfg.GID)
}

func (s *Server) sysProcAttrAs(uid, gid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	// Only root can switch users; a test running as someone else runs
	// commands as itself.
	if os.Getuid() == 0 || uid != os.Getuid() || gid != os.Getgid() {
		a.Credential = &syscall.Credential{
			Uid:    uint32(uid),
			Gid:    uint32(gid),
			Groups: []uint32{},
		}
	}
	return a
}

// wait reaps the command, drains its output (for at most outputGrace
// after it exited) and records its end.
func (p *proc) wait(outR, errR, feed *os.File, onOut, onErr func([]byte), reaper *orphanReaper) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pump(outR, onOut) }()
	go func() { defer wg.Done(); pump(errR, onErr) }()
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(p.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	reaper.waited(p.pid)
	close(p.exited)
	if p.timer != nil {
		p.timer.Stop()
	}
	deadline := time.Now().Add(outputGrace)
	_ = outR.SetReadDeadline(deadline)
	_ = errR.SetReadDeadline(deadline)
	wg.Wait()
	outR.Close()
	errR.Close()
	if feed != nil {
		// Descendants that still hold stdin get stdinGrace to read it.
		_ = feed.SetWriteDeadline(time.Now().Add(stdinGrace))
	}
	p.closeStdin()
	code := exitCode(ws)
	p.mu.Lock()
	p.exitCode = &code
	p.ended = time.Now().UTC()
	p.mu.Unlock()
	close(p.done)
	p.bell.ring()
}

// expire is the timeout: it kills the tree unless the command has ended.
func (p *proc) expire() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.timedOut.Store(true)
	p.kill()
}

// kill kills the command and all its descendants.
func (p *proc) kill() {
	pgid := p.pid
	select {
	case <-p.exited:
		// The group's number may be reused once its leader is reaped:
		// from now on only the tag identifies the tree.
		pgid = 0
	default:
	}
	killTree(pgid, p.tag)
}

// exitCode is the shell's view of a status: 128+n for a death by signal n.
func exitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Signaled():
		return 128 + int(ws.Signal())
	case ws.Exited():
		return ws.ExitStatus()
	}
	return -1
}

// pump passes what r yields to emit, in chunks as they arrive, never
// splitting a UTF-8 sequence across two chunks: a chunk that is valid UTF-8
// goes out as a JSON string, so a character cut in two must not make both
// halves invalid (and base64).
func pump(r *os.File, emit func([]byte)) {
	bp := pumpBuffers.Get().(*[]byte)
	defer pumpBuffers.Put(bp)
	buf := *bp
	carry := 0
	for {
		n, err := r.Read(buf[carry:])
		n += carry
		cut := n
		if err == nil {
			cut = completeUTF8(buf[:n])
		}
		if cut > 0 {
			emit(buf[:cut])
		}
		carry = copy(buf, buf[cut:n])
		if err != nil {
			return
		}
	}
}

// pumpBuffers are pump's read buffers: each exec has two pumps, and
// emit copies what it is given (into an event or a tail), so a buffer is
// free again once its pump returns.
var pumpBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// completeUTF8 is the length of the longest prefix of b that does not end
// inside a UTF-8 sequence.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// info is p as the API shows it.
func (p *proc) info() api.Process { return p.infoWith(true) }

// infoWith is info, without the output (nor a copy of it) unless output.
func (p *proc) infoWith(output bool) api.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := api.Process{
		Pid:       p.pid,
		Cmd:       p.cmd,
		Running:   p.exitCode == nil,
		TimedOut:  p.timedOut.Load(),
		StartedAt: p.started,
		Cwd:       p.cwd,
		User:      p.user,
		StdinOpen: p.stdinOpen(),
	}
	if p.exitCode != nil {
		code := *p.exitCode
		ended := p.ended
		out.ExitCode = &code
		out.EndedAt = &ended
	}
	if output && p.stdout != nil {
		var stdout, stderr string
		stdout, out.StdoutTruncated = p.stdout.snapshot()
		stderr, out.StderrTruncated = p.stderr.snapshot()
		out.SetOutput(stdout, stderr)
	}
	return out
}
