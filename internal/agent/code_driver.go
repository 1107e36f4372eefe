package agent

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/lines"
)

//go:embed kerneldriver.py
var kernelDriver string

const (
	// maxDriverLine bounds one line from a driver. The driver keeps its
	// lines under 8 MiB; a longer one means it misbehaves.
	maxDriverLine = 16 << 20
	// driverStderr is how much of a driver's stderr is kept for messages.
	driverStderr = 4 << 10
)

// driverEvent is one line from a driver: an api.CodeEvent's fields, plus
// "ready", "dead" and "fatal" (with Message) of its own.
type driverEvent struct {
	Type           string             `json:"type"`
	Text           string             `json:"text"`
	Result         *api.CodeResult    `json:"result"`
	Exception      *api.CodeException `json:"exception"`
	ExecutionCount int                `json:"execution_count"`
	Message        string             `json:"message"`
}

// driverOp is one line to a driver.
type driverOp struct {
	Op   string `json:"op"`
	ID   int64  `json:"id"`
	Code string `json:"code,omitempty"`
}

// driver is one running driver process and, under it, its kernel.
type driver struct {
	pid     int
	tag     string
	stdin   *os.File
	ops     chan []byte      // lines for stdin, written in order by one goroutine
	events  chan driverEvent // closed once stdout ends or breaks
	ready   chan struct{}    // closed on "ready"
	exited  chan struct{}    // closed once the driver itself is reaped
	killed  chan struct{}    // closed by kill: nobody reads events any more
	readEnd chan struct{}    // closed once read has returned
	errEnd  chan struct{}    // closed once stderr has ended
	stderr  *tail

	mu      sync.Mutex // guards broken and why
	broken  error      // why events ended, once they have
	why     string     // set by whoever killed it on purpose
	readyOK atomic.Bool
	nextID  atomic.Int64
}

// startDriver starts the driver for cx. It returns once the process runs;
// the kernel under it takes seconds more to answer (see driver.ready).
func (s *Server) startDriver(cx *codeContext) (*driver, error) {
	tag, err := newTag()
	if err != nil {
		return nil, err
	}
	env, pathEnv := s.environ(cx.env, tag)
	argv := s.code.driverArgv
	if argv == nil {
		argv = []string{"python3", "-I", "-c", kernelDriver}
	}
	path, err := findExecutable(argv[0], pathEnv, cx.cwd)
	if err != nil {
		return nil, fmt.Errorf("the code interpreter cannot start: %s", strings.TrimSpace(err.Error()))
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	c := &exec.Cmd{
		Path:        path,
		Args:        argv,
		Dir:         cx.cwd,
		Env:         env,
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: s.sysProcAttr(),
	}
	err = s.reaper.start(c)
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("starting the code interpreter: %w", err)
	}
	d := &driver{
		pid:     c.Process.Pid,
		tag:     tag,
		stdin:   inW,
		ops:     make(chan []byte, 8),
		events:  make(chan driverEvent, 64),
		ready:   make(chan struct{}),
		exited:  make(chan struct{}),
		killed:  make(chan struct{}),
		readEnd: make(chan struct{}),
		errEnd:  make(chan struct{}),
		stderr:  newTail(driverStderr),
	}
	go func() {
		_ = c.Wait()
		s.reaper.waited(d.pid)
		close(d.exited)
	}()
	go func() { pump(errR, d.stderr.write); errR.Close(); close(d.errEnd) }()
	go d.read(outR)
	go d.write(inW)
	return d, nil
}

// read turns the driver's stdout into events until it ends or breaks. A
// line that is too long or not an event breaks it: the driver is killed.
func (d *driver) read(r *os.File) {
	defer close(d.readEnd)
	defer r.Close()
	sc := lines.NewWhole(r, maxDriverLine)
	var err error
	for err == nil {
		if !sc.Scan() {
			err = lineError(sc.Err())
			break
		}
		line := sc.Bytes()
		var ev driverEvent
		if e := json.Unmarshal(line, &ev); e != nil || ev.Type == "" {
			err = fmt.Errorf("the driver wrote a line that is not an event: %.80q", line)
			break
		}
		if ev.Type == "ready" {
			if d.readyOK.CompareAndSwap(false, true) {
				close(d.ready)
			}
			continue
		}
		// A killed driver's events have no reader left (the cell ended,
		// the context was restarted): blocking here would keep this
		// goroutine, the pipe and the buffered events for good.
		select {
		case d.events <- ev:
		case <-d.killed:
			err = errors.New("the driver was killed")
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the driver exited")
	}
	d.mu.Lock()
	d.broken = err
	d.mu.Unlock()
	close(d.events)
	d.kill("")
}

// lineError says why the driver's stdout ended: a line over the bound,
// one cut by the driver's exit, a read error, or io.EOF.
func lineError(err error) error {
	switch {
	case err == nil:
		return io.EOF
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("the driver wrote a line longer than %d bytes", maxDriverLine)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the driver exited in the middle of a line")
	}
	return err
}

// write feeds queued lines to the driver's stdin. It ends when the driver
// is killed (stdin closed).
func (d *driver) write(stdin *os.File) {
	for b := range d.ops {
		if _, err := stdin.Write(b); err != nil {
			d.kill("")
			for range d.ops {
			}
			return
		}
	}
}

// send queues op for the driver; false when the driver cannot take it.
func (d *driver) send(op driverOp) bool {
	b, err := json.Marshal(op)
	if err != nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stdin == nil {
		return false // killed: d.ops is closed
	}
	select {
	case d.ops <- append(b, '\n'):
		return true
	default:
		return false
	}
}

// kill kills the driver, its kernel and everything they started. A
// non-empty why says it was on purpose, for a cell that is running.
func (d *driver) kill(why string) {
	d.mu.Lock()
	if why != "" && d.why == "" {
		d.why = why
	}
	if d.stdin != nil {
		d.stdin.Close()
		d.stdin = nil
		close(d.ops)
		close(d.killed)
	}
	d.mu.Unlock()
	pgid := d.pid
	select {
	case <-d.exited:
		pgid = 0 // the group's number may be reused: only the tag is sure
	default:
	}
	killTree(pgid, d.tag)
}

// reason is why the driver's events ended: its own failure, or why it
// was killed on purpose (killed reports which).
func (d *driver) reason() (why string, onPurpose bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.why != "" {
		return d.why, true
	}
	if d.broken != nil {
		return d.broken.Error(), false
	}
	return "the driver stopped", false
}

// alive reports whether the driver's events still flow. A driver whose
// process has been waited for is not, even before its reader has seen the
// end of its output.
func (d *driver) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.broken == nil && d.why == "" && d.stdin != nil
}

// stderrWait bounds how long a message about a failed driver waits for
// the rest of its stderr, which a pipe may deliver after its last event.
const stderrWait = 500 * time.Millisecond

// lastStderr is the end of the driver's stderr, for a message. It waits a
// little for a driver that is ending to finish writing it.
func (d *driver) lastStderr() string {
	t := time.NewTimer(stderrWait)
	defer t.Stop()
	select {
	case <-d.errEnd:
	case <-t.C:
	}
	s, _ := d.stderr.snapshot()
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[len(s)-300:]
	}
	return s
}
