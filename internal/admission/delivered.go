package admission

import "bytes"

// A connection that has delivered the whole of a request's headers is
// about to be served, however long the server takes to get to it (a busy
// host, a descheduled goroutine): the Listener does not evict it. What it
// has delivered is what net/http read of it (Read watches for the end of
// the headers) and what waits in the kernel, unread (peek).

// headerEnd reports whether the bytes read before (their last two, in
// tail) followed by p hold an empty line, the end of a request's headers:
// "\r\n\r\n", or the bare newlines net/http also accepts. It returns the
// last two bytes of all.
func headerEnd(tail [2]byte, p []byte) (bool, [2]byte) {
	var seam [4]byte
	copy(seam[:], tail[:])
	k := 2 + copy(seam[2:], p)
	found := emptyLine(seam[:k]) || emptyLine(p)
	switch {
	case len(p) >= 2:
		tail = [2]byte{p[len(p)-2], p[len(p)-1]}
	case len(p) == 1:
		tail = [2]byte{tail[1], p[0]}
	}
	return found, tail
}

func emptyLine(b []byte) bool {
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\n\r\n"))
}

// delivered reports whether c's client has sent all of its request's
// headers. scratch is room for what the kernel holds unread.
func (c *conn) delivered(scratch []byte) bool {
	if !c.reading.Load() {
		return false // in its handler, or idle: nothing delivered
	}
	if c.ended.Load() {
		return true
	}
	n := peek(c.Conn, scratch)
	if n <= 0 {
		return false
	}
	found, _ := headerEnd(c.lastTwo(), scratch[:n])
	return found
}
