package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// flow is one proxied connection of a sandbox with everything it holds
// open: the sandbox's end, then the upstream once dialed. It closes them
// all when no byte has moved either way for its idle timeout, when its
// sandbox stops running, or when the proxy closes; and it holds one of its
// sandbox's, its account's and the host's connection slots until then.
type flow struct {
	id, account string // its sandbox's
	start       time.Time
	idle        atomic.Int64 // the idle timeout, nanoseconds
	last        atomic.Int64 // nanoseconds since start of the latest read or write

	mu      sync.Mutex // guards closers, closed, timer
	closers []io.Closer
	closed  bool
	timer   *time.Timer
}

func newFlow(id, account string, idle time.Duration) *flow {
	f := &flow{id: id, account: account, start: time.Now()}
	f.idle.Store(int64(idle))
	// Under f.mu: with a short timeout the timer can fire, and check
	// reach close (which stops it), before AfterFunc has returned.
	f.mu.Lock()
	defer f.mu.Unlock()
	f.timer = time.AfterFunc(idle, f.check)
	return f
}

// shorten lowers the flow's idle timeout to d (counted from its latest
// traffic): for a connection one side of which has ended.
func (f *flow) shorten(d time.Duration) {
	if d >= time.Duration(f.idle.Load()) {
		return
	}
	f.idle.Store(int64(d))
	f.check()
}

// touch records traffic now.
func (f *flow) touch() { f.last.Store(int64(time.Since(f.start))) }

// check runs when the timer fires: it closes the flow if it has been idle
// for the whole timeout, and otherwise waits for the rest of it.
func (f *flow) check() {
	idle := time.Duration(f.idle.Load())
	quiet := time.Since(f.start) - time.Duration(f.last.Load())
	if quiet >= idle {
		f.close()
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.timer.Reset(idle - quiet)
	}
}

// add makes c part of the flow: closed with it, and closed at once if the
// flow already is. It reports whether the flow is still open.
func (f *flow) add(c io.Closer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return false
	}
	f.closers = append(f.closers, c)
	return true
}

// wrap adds c to the flow and returns it counting its traffic as the
// flow's activity; nil if the flow is closed.
func (f *flow) wrap(c net.Conn) net.Conn {
	if !f.add(c) {
		return nil
	}
	return &flowConn{Conn: c, f: f}
}

// close closes everything the flow holds; it is idempotent.
func (f *flow) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
	}
	for _, c := range f.closers {
		c.Close()
	}
	f.closers = nil
}

// flowConn is a connection whose reads and writes keep its flow alive.
type flowConn struct {
	net.Conn
	f *flow
}

func (c *flowConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.f.touch()
	}
	return n, err
}

func (c *flowConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.f.touch()
	}
	return n, err
}

// CloseWrite half-closes the connection if it can be; splice passes a
// half-close on through it.
func (c *flowConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("cannot half-close")
}

// flowLimits bound how many flows are live at once: of one sandbox, of
// one account (all its sandboxes together), of the whole host (every
// flow holds up to two of the server's descriptors). 0: no bound.
type flowLimits struct {
	sandbox, account, host int
}

// flowTable holds every live flow by sandbox and keeps them within its
// limits.
type flowTable struct {
	lim flowLimits

	mu       sync.Mutex // guards by, accounts, total
	by       map[string]map[*flow]struct{}
	accounts map[string]int
	total    int
}

func newFlowTable(lim flowLimits) *flowTable {
	return &flowTable{lim: lim, by: map[string]map[*flow]struct{}{}, accounts: map[string]int{}}
}

// open starts a flow for sandbox id of account, or says which limit
// refuses it.
func (t *flowTable) open(id, account string, idle time.Duration) (*flow, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.by[id]
	switch {
	case t.lim.sandbox > 0 && len(set) >= t.lim.sandbox:
		return nil, fmt.Sprintf("connection limit (%d open)", len(set))
	case t.lim.account > 0 && t.accounts[account] >= t.lim.account:
		return nil, fmt.Sprintf("account connection limit (%d open)", t.accounts[account])
	case t.lim.host > 0 && t.total >= t.lim.host:
		return nil, fmt.Sprintf("host connection limit (%d open)", t.total)
	}
	if set == nil {
		set = map[*flow]struct{}{}
		t.by[id] = set
	}
	f := newFlow(id, account, idle)
	set[f] = struct{}{}
	t.accounts[account]++
	t.total++
	return f, ""
}

// done closes f and frees its slots.
func (t *flowTable) done(f *flow) {
	f.close()
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.by[f.id]
	if _, ok := set[f]; !ok {
		return
	}
	delete(set, f)
	if len(set) == 0 {
		delete(t.by, f.id)
	}
	if t.accounts[f.account]--; t.accounts[f.account] == 0 {
		delete(t.accounts, f.account)
	}
	t.total--
}

// closeSandbox closes every flow of sandbox id; their goroutines free the
// slots as they end.
func (t *flowTable) closeSandbox(id string) {
	t.mu.Lock()
	flows := make([]*flow, 0, len(t.by[id]))
	for f := range t.by[id] {
		flows = append(flows, f)
	}
	t.mu.Unlock()
	for _, f := range flows {
		f.close()
	}
}

// closeAll closes every flow.
func (t *flowTable) closeAll() {
	t.mu.Lock()
	var flows []*flow
	for _, set := range t.by {
		for f := range set {
			flows = append(flows, f)
		}
	}
	t.mu.Unlock()
	for _, f := range flows {
		f.close()
	}
}

// live is how many flows sandbox id has.
func (t *flowTable) live(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.by[id])
}

// counts are the live flows of account and of the host.
func (t *flowTable) counts(account string) (ofAccount, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.accounts[account], t.total
}
