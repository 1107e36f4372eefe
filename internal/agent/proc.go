package agent

import (
	"os"
	"os/exec"
	"strings"
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

	// pty is a terminal's primary side, nil for other processes; ptyMu
	// guards its closing against a resize.
	pty       *os.File
	ptyMu     sync.Mutex
	ptyClosed bool

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
	c := &exec.Cmd{
		Path:        l.path,
		Args:        l.argv,
		Dir:         l.dir,
		Env:         l.env,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: s.sysProcAttrAs(l.user.uid, l.user.gid),
		// Bounds how long Wait lets the stdin copy block once the command
		// has exited (a descendant may hold stdin and never read it).
		WaitDelay: time.Second,
	}
	if l.stdin != "" {
		c.Stdin = strings.NewReader(l.stdin)
	}
	var inW *os.File
	if l.keepStdin {
		// An *os.File as Stdin goes to the child as it is: no copying
		// goroutine that Wait would wait for.
		var inR *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			errR.Close()
			outW.Close()
			errW.Close()
			return nil, err
		}
		c.Stdin = inR
		defer inR.Close()
	}
	err = s.reaper.start(c)
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
	p := newProc(c.Process.Pid, l, inW)
	if onStart != nil {
		onStart(p.pid)
	}
	go p.wait(c, outR, errR, p.ringing(onOut), p.ringing(onErr), s.reaper)
	return p, nil
}

// newProc is the record of l, started as pid with stdin (nil unless kept
// open), its timeout running.
func newProc(pid int, l *launch, stdin *os.File) *proc {
	p := &proc{
		pid:     pid,
		cmd:     l.cmd,
		tag:     l.tag,
		started: time.Now().UTC(),
		exited:  make(chan struct{}),
		done:    make(chan struct{}),
		cwd:     l.dir,
		user:    l.user.name,
		stdin:   stdin,
	}
	if l.timeout > 0 {
		p.timer = time.AfterFunc(l.timeout, p.expire)
	}
	return p
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

func (p *proc) wait(c *exec.Cmd, outR, errR *os.File, onOut, onErr func([]byte), reaper *orphanReaper) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pump(outR, onOut) }()
	go func() { defer wg.Done(); pump(errR, onErr) }()
	_ = c.Wait() // the status is in c.ProcessState; ErrWaitDelay is no failure
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
	p.closeStdin()
	p.finish(c)
}

// finish records the end of p's command c, once its output is all kept.
func (p *proc) finish(c *exec.Cmd) {
	code := exitCode(c.ProcessState)
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
func exitCode(st *os.ProcessState) int {
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// pump passes what r yields to emit, in chunks as they arrive, never
// splitting a UTF-8 sequence across two chunks: a chunk that is valid UTF-8
// goes out as a JSON string, so a character cut in two must not make both
// halves invalid (and base64).
func pump(r *os.File, emit func([]byte)) {
	buf := make([]byte, 32<<10)
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
		Pty:       p.pty != nil,
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
