package egress

import (
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
)

// maxRecord is TLS's largest plaintext record fragment.
const maxRecord = 1 << 14

// helloReader reassembles a ClientHello from TLS records as they arrive
// and reads its server name. It is incremental: feed is given the whole
// buffer each time, but looks only at the records it has not taken yet,
// so that a client sending a byte at a time costs linear work.
type helloReader struct {
	off int    // bytes of the buffer taken: whole records
	hs  []byte // the handshake bytes of those records
}

// parseClientHello reads the server name from TLS records holding a
// ClientHello (possibly split over several records). complete is false
// while more bytes are needed; name is "" when the hello has none.
func parseClientHello(b []byte) (name string, complete bool, err error) {
	var h helloReader
	return h.feed(b)
}

// feed takes b, the connection's bytes so far (what an earlier call saw
// and more), and returns parseClientHello's verdict on it.
func (h *helloReader) feed(b []byte) (name string, complete bool, err error) {
	for {
		rest := cryptobyte.String(b[h.off:])
		var typ uint8
		var n uint16
		if !rest.ReadUint8(&typ) || !rest.Skip(2) || !rest.ReadUint16(&n) {
			return "", false, nil
		}
		if typ != 0x16 {
			return "", false, errors.New("not a handshake record")
		}
		if n == 0 || n > maxRecord {
			return "", false, errors.New("bad record length")
		}
		var frag []byte
		if !rest.ReadBytes(&frag, int(n)) {
			return "", false, nil
		}
		h.off += 5 + int(n)
		h.hs = append(h.hs, frag...)
		msg := cryptobyte.String(h.hs)
		var msgType uint8
		var msgLen uint32
		if !msg.ReadUint8(&msgType) || !msg.ReadUint24(&msgLen) {
			continue
		}
		if msgType != 1 {
			return "", false, errors.New("not a ClientHello")
		}
		if msgLen > maxHead {
			return "", false, errors.New("ClientHello too large")
		}
		var body []byte
		if msg.ReadBytes(&body, int(msgLen)) {
			name, err := serverName(body)
			return name, true, err
		}
	}
}

// serverName parses a ClientHello body as crypto/tls does (RFC 8446,
// 4.1.2; RFC 6066, 3) and returns its host_name, normalized: "" or a name
// that passes checkHostname, never anything else.
func serverName(body []byte) (string, error) {
	s := cryptobyte.String(body)
	var sessionID, suites, compression cryptobyte.String
	if !s.Skip(2+32) || // legacy_version, random
		!s.ReadUint8LengthPrefixed(&sessionID) ||
		!s.ReadUint16LengthPrefixed(&suites) ||
		!s.ReadUint8LengthPrefixed(&compression) {
		return "", errors.New("malformed ClientHello")
	}
	if s.Empty() {
		return "", nil // no extensions
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return "", errors.New("malformed extensions")
	}
	name := ""
	seen := false
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return "", errors.New("malformed extensions")
		}
		if typ != 0 { // server_name
			continue
		}
		if seen {
			return "", errors.New("two server_name extensions")
		}
		seen = true
		var list cryptobyte.String
		if !data.ReadUint16LengthPrefixed(&list) || list.Empty() || !data.Empty() {
			return "", errors.New("malformed server_name")
		}
		for !list.Empty() {
			var nameType uint8
			var host cryptobyte.String
			if !list.ReadUint8(&nameType) || !list.ReadUint16LengthPrefixed(&host) {
				return "", errors.New("malformed server_name")
			}
			if nameType != 0 { // host_name
				continue
			}
			if name != "" {
				return "", errors.New("two host names")
			}
			if len(host) == 0 {
				return "", errors.New("empty server name")
			}
			name = normalize(string(host))
			// The policy and the resolver take names, not arbitrary
			// bytes: refuse here what they could read differently.
			if err := checkHostname(name); err != nil {
				return "", fmt.Errorf("server name is not a host name: %w", err)
			}
		}
	}
	return name, nil
}
