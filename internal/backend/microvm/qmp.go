package microvm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/lines"
	"golang.org/x/sys/unix"
)

// qmp is a connection to QEMU's monitor. QEMU's answers are trusted no
// more than the guest: lines are bounded and only what a command returns
// is read.
type qmp struct {
	mu sync.Mutex // one command at a time
	c  net.Conn
	r  *bufio.Scanner // QEMU's lines, each at most maxQMPLine bytes
}

// maxQMPLine bounds one line QEMU writes on its monitor.
const maxQMPLine = 1 << 20

// dialJailSocket connects to a socket QEMU made in its writable
// directory, and checks that QEMU (pid) is the one listening: that
// directory is QEMU's, so a compromised QEMU could have put anything
// there, and the host only ever talks to the process it started.
func dialJailSocket(ctx context.Context, path string, pid int) (net.Conn, error) {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			uc := c.(*net.UnixConn)
			raw, err := uc.SyscallConn()
			if err != nil {
				c.Close()
				return nil, err
			}
			var cred *unix.Ucred
			var cerr error
			raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
			if cerr != nil || int(cred.Pid) != pid {
				c.Close()
				return nil, fmt.Errorf("%s is not this sandbox's QEMU's", path)
			}
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to qemu: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func dialQMP(ctx context.Context, path string, pid int) (*qmp, error) {
	c, err := dialJailSocket(ctx, path, pid)
	if err != nil {
		return nil, err
	}
	q := &qmp{c: c, r: lines.New(c, maxQMPLine)}
	if deadline, ok := ctx.Deadline(); ok {
		c.SetDeadline(deadline)
	}
	if _, err := q.line(); err != nil { // the greeting
		c.Close()
		return nil, err
	}
	if err := q.run("qmp_capabilities", nil, nil); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return q, nil
}

func (q *qmp) Close() error { return q.c.Close() }

// line returns QEMU's next line, valid until the next call.
func (q *qmp) line() ([]byte, error) {
	if q.r.Scan() {
		return q.r.Bytes(), nil
	}
	err := q.r.Err()
	switch {
	case err == nil:
		err = io.EOF
	case errors.Is(err, bufio.ErrTooLong):
		return nil, fmt.Errorf("qmp: a line over %d bytes", maxQMPLine)
	}
	return nil, fmt.Errorf("qmp: %w", err)
}

// run executes one command and decodes its return value into out (nil:
// ignored). Events that arrive meanwhile are skipped.
func (q *qmp) run(cmd string, args any, out any) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	data, _ := json.Marshal(req)
	if _, err := q.c.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("qmp %s: %w", cmd, err)
	}
	for {
		line, err := q.line()
		if err != nil {
			return err
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Desc string `json:"desc"`
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return fmt.Errorf("qmp %s: %w", cmd, err)
		}
		if resp.Event != "" {
			continue
		}
		if resp.Error != nil {
			return fmt.Errorf("qmp %s: %s", cmd, resp.Error.Desc)
		}
		if out != nil && resp.Return != nil {
			return json.Unmarshal(resp.Return, out)
		}
		return nil
	}
}

// sendFD passes f to QEMU under name (QMP getfd), for migrating to or
// from a file the host opened.
func (q *qmp) sendFD(name string, f *os.File) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	data, _ := json.Marshal(map[string]any{"execute": "getfd", "arguments": map[string]string{"fdname": name}})
	uc := q.c.(*net.UnixConn)
	if _, _, err := uc.WriteMsgUnix(append(data, '\n'), unix.UnixRights(int(f.Fd())), nil); err != nil {
		return fmt.Errorf("qmp getfd: %w", err)
	}
	for {
		line, err := q.line()
		if err != nil {
			return err
		}
		var resp struct {
			Error *struct {
				Desc string `json:"desc"`
			} `json:"error"`
			Event string `json:"event"`
		}
		if json.Unmarshal(line, &resp) != nil || resp.Event != "" {
			continue
		}
		if resp.Error != nil {
			return fmt.Errorf("qmp getfd: %s", resp.Error.Desc)
		}
		return nil
	}
}
