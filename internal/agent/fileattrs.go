package agent

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/withruntime/withruntime/api"
)

// What FileInfo reports beyond stat(2): the owner's and group's names and
// the user-namespace extended attributes.

const (
	attrPrefix = "user."
	// maxAccountsFile bounds the bytes of /etc/passwd and /etc/group read.
	maxAccountsFile = 1 << 20
	// namesTTL is how long the names read stay in use: a listing of many
	// files reads the two files once.
	namesTTL = 2 * time.Second
	// maxAttrList is the kernel's own bound on a file's list of
	// attribute names.
	maxAttrList = 64 << 10
)

type idNames struct {
	mu     sync.Mutex
	read   time.Time
	users  map[uint32]string
	groups map[uint32]string
}

var accountNames idNames

// ownerGroup names uid and gid as the sandbox's /etc/passwd and
// /etc/group do, or by the decimal ids where they name none.
func ownerGroup(uid, gid uint32) (owner, group string) {
	n := &accountNames
	n.mu.Lock()
	defer n.mu.Unlock()
	if time.Since(n.read) > namesTTL {
		n.users = readIDNames("/etc/passwd")
		n.groups = readIDNames("/etc/group")
		n.read = time.Now()
	}
	owner, ok := n.users[uid]
	if !ok {
		owner = strconv.FormatUint(uint64(uid), 10)
	}
	group, ok = n.groups[gid]
	if !ok {
		group = strconv.FormatUint(uint64(gid), 10)
	}
	return owner, group
}

// readIDNames reads name:x:id lines (passwd and group alike) from the
// first maxAccountsFile bytes of path; the first name of an id wins. A
// file that cannot be read names nothing.
func readIDNames(path string) map[uint32]string {
	names := map[uint32]string{}
	f, err := os.Open(path)
	if err != nil {
		return names
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxAccountsFile))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), ":", 4)
		if len(fields) < 3 || fields[0] == "" {
			continue
		}
		id, err := strconv.ParseUint(fields[2], 10, 32)
		if err != nil {
			continue
		}
		if _, dup := names[uint32(id)]; !dup {
			names[uint32(id)] = fields[0]
		}
	}
	return names
}

// readAttrs is path's user-namespace extended attributes (a final
// symlink not followed), at most api.MaxFileAttrBytes of them; values
// that are not text are left out. A filesystem without them has none.
func readAttrs(path string) map[string]string {
	// Most files have none: one call that asks only the list's size.
	size, err := unix.Llistxattr(path, nil)
	if err != nil || size <= 0 {
		return nil
	}
	buf := make([]byte, min(size, maxAttrList))
	n, err := unix.Llistxattr(path, buf)
	if errors.Is(err, syscall.ERANGE) && len(buf) < maxAttrList { // grown meanwhile
		buf = make([]byte, maxAttrList)
		n, err = unix.Llistxattr(path, buf)
	}
	if err != nil || n <= 0 {
		return nil
	}
	var attrs map[string]string
	total := 0
	val := make([]byte, api.MaxFileAttrBytes)
	for _, name := range bytes.Split(buf[:n], []byte{0}) {
		full := string(name)
		if !strings.HasPrefix(full, attrPrefix) || len(full) == len(attrPrefix) {
			continue
		}
		m, err := unix.Lgetxattr(path, full, val)
		if err != nil || total+len(full)+m > api.MaxFileAttrBytes || !utf8.Valid(val[:m]) || !utf8.ValidString(full) {
			continue
		}
		total += len(full) + m
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[full[len(attrPrefix):]] = string(val[:m])
	}
	return attrs
}

// attrParams reads ?attr=NAME=VALUE (repeatable): printable ASCII, a
// name without "user.", at most api.MaxFileAttrBytes in all with the
// prefix counted per name. A name given twice keeps its first value.
func attrParams(r *http.Request) (map[string]string, error) {
	vs := r.URL.Query()["attr"]
	if len(vs) == 0 {
		return nil, nil
	}
	attrs := map[string]string{}
	total := 0
	for _, v := range vs {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return nil, invalidf("attr must be NAME=VALUE, not %q", v)
		}
		if !printable(name) || !printable(value) || strings.ContainsAny(name, " ") {
			return nil, invalidf("attr %q: names and values must be printable ASCII (names without spaces)", name)
		}
		if _, dup := attrs[name]; dup {
			continue
		}
		if len(attrPrefix)+len(name) > 255 {
			return nil, invalidf("attr name %q is over %d bytes", name, 255-len(attrPrefix))
		}
		if total += len(attrPrefix) + len(name) + len(value); total > api.MaxFileAttrBytes {
			return nil, invalidf("attrs are over %d bytes in all (names with their %q prefix, plus values)", api.MaxFileAttrBytes, attrPrefix)
		}
		attrs[name] = value
	}
	return attrs, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// setAttrs sets attrs on the open file f. A filesystem without
// user-namespace attributes refuses with not_supported.
func setAttrs(f *os.File, attrs map[string]string) error {
	for name, value := range attrs {
		if err := unix.Fsetxattr(int(f.Fd()), attrPrefix+name, []byte(value), 0); err != nil {
			if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
				return unsupportedf("this filesystem keeps no extended attributes (%s)", f.Name())
			}
			return err
		}
	}
	return nil
}
