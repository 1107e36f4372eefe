package client

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Who holds a TCP port, from the kernel's socket tables (/proc/net/tcp and
// tcp6, Linux only). The local daemon's admin key goes only to a listener
// that belongs to the key file's owner: any local user can listen on the
// default address while no daemon runs, and a client that trusted whatever
// answers there would hand that user the admin key.

// errNoListenerTable says the kernel's socket tables cannot be read (not
// Linux): who listens cannot be checked, so no local key is sent.
var errNoListenerTable = errors.New("the kernel's socket table (/proc/net/tcp) cannot be read")

// maxSocketTable bounds what is read of one socket table.
const maxSocketTable = 64 << 20

// listener is one listening socket as the kernel reports it.
type listener struct {
	uid   int
	inode uint64
}

// tcpState LISTEN in /proc/net/tcp.
const tcpListen = "0A"

// listenersOn returns the sockets that could take a connection to addr
// (host:port, host an IP literal): those listening on its port at its
// address or the unspecified one (tcp6's "::" counts for IPv4, as a dual
// stack socket takes IPv4 connections).
func listenersOn(addr string) ([]listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host)
	p, err := strconv.ParseUint(port, 10, 16)
	if ip == nil || err != nil {
		return nil, fmt.Errorf("%s: want an IP address and a port", addr)
	}
	var all []listener
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if errors.Is(err, os.ErrNotExist) && table == "/proc/net/tcp6" {
			continue // IPv6 disabled
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNoListenerTable, err)
		}
		ls, err := parseListeners(io.LimitReader(f, maxSocketTable), ip, uint16(p))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", table, err)
		}
		all = append(all, ls...)
	}
	return all, nil
}

// parseListeners reads one socket table and returns the listening sockets
// that take connections to ip:port.
func parseListeners(r io.Reader, ip net.IP, port uint16) ([]listener, error) {
	var out []listener
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 4096)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		lip, lport, err := parseSocketAddr(f[1])
		if err != nil {
			return nil, err
		}
		if lport != port || !(lip.Equal(ip) || (lip.IsUnspecified() && (len(lip) == net.IPv6len || ip.To4() != nil))) {
			continue
		}
		uid, err1 := strconv.Atoi(f[7])
		inode, err2 := strconv.ParseUint(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad line %q", sc.Text())
		}
		out = append(out, listener{uid: uid, inode: inode})
	}
	return out, sc.Err()
}

// parseSocketAddr decodes the kernel's "0100007F:1ECE": the address as
// 32-bit words in host byte order, the port in hex. An IPv4 address comes
// back as 4 bytes, an IPv6 one as 16.
func parseSocketAddr(s string) (net.IP, uint16, error) {
	h, p, ok := strings.Cut(s, ":")
	b, err := hex.DecodeString(h)
	port, perr := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || perr != nil || (len(b) != net.IPv4len && len(b) != net.IPv6len) {
		return nil, 0, fmt.Errorf("bad socket address %q", s)
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(b[i:]))
	}
	return ip, uint16(port), nil
}

// ownedListeners checks that every socket listening on addr belongs to
// uid and returns their inodes. None listening is errNothingListens; one
// of another user is a *APIError forbidden that names it (see holder).
func ownedListeners(addr string, uid int) (map[uint64]bool, error) {
	ls, err := listenersOn(addr)
	if err != nil {
		return nil, err
	}
	if len(ls) == 0 {
		return nil, errNothingListens
	}
	inodes := make(map[uint64]bool, len(ls))
	for _, l := range ls {
		if l.uid != uid {
			return nil, foreignListener(addr, l, uid)
		}
		inodes[l.inode] = true
	}
	return inodes, nil
}

// errNothingListens: nothing listens on the address (connection refused,
// as far as a caller can tell).
var errNothingListens = fmt.Errorf("nothing listens there: %w", syscall.ECONNREFUSED)

// foreignListener is the error for a listener of another user than owner.
func foreignListener(addr string, l listener, owner int) error {
	return &APIError{Code: CodeForbidden, Status: http.StatusForbidden, Message: fmt.Sprintf(
		"%s is held by %s of user %s, not by the local daemon of user %s, who owns its admin key; refusing to send it the local admin key",
		addr, holder(l.inode), userName(l.uid), userName(owner))}
}

// CheckLocalListener says whether something listens on addr (host:port,
// host an IP literal) and, when it does, checks with the kernel that every
// socket listening there belongs to uid. A listener of another user is an
// *APIError with code forbidden naming its process and user; where the
// kernel's socket table cannot be read (not Linux) the error wraps
// errors.ErrUnsupported.
func CheckLocalListener(addr string, uid int) (listening bool, err error) {
	_, err = ownedListeners(addr, uid)
	if errors.Is(err, errNothingListens) {
		return false, nil
	}
	if errors.Is(err, errNoListenerTable) {
		return false, fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err == nil || errors.As(err, new(*APIError)), err
}

// holder names the process holding socket inode ("process 1234
// (python3)"), looking through /proc/*/fd, as far as this user can see.
func holder(inode uint64) string {
	want := fmt.Sprintf("socket:[%d]", inode)
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fdDir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && l == want {
				comm, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
				return fmt.Sprintf("process %d (%s)", pid, strings.TrimSpace(string(comm)))
			}
		}
	}
	return fmt.Sprintf("a process this user cannot see (socket inode %d)", inode)
}

// userName is "name (uid N)", or "uid N" when the name is unknown.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}
