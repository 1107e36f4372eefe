package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrInvalidAllow is wrapped by ValidateAllow for an entry that is not a
// host name or a "*." wildcard.
var ErrInvalidAllow = errors.New("invalid allow entry")

// Allows reports whether the policy lets the sandbox reach name. The name
// is compared in lower case without a trailing dot. A wildcard
// "*.example.org" matches every name under example.org, not example.org
// itself. Address entries of the list match no name: they are checked
// against the addresses a connection goes to (AllowsAddr).
func (p Policy) Allows(name string) bool {
	if !p.Internet {
		return false
	}
	name = normalize(name)
	if name == "" {
		return false
	}
	if len(p.Allow) == 0 {
		return true
	}
	for _, pattern := range p.Allow {
		if _, isAddr := allowPrefix(pattern); !isAddr && matchHost(pattern, name) {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether an address entry of the allow list (an
// address or a CIDR prefix) covers addr. With no allow list every address
// is allowed; the addresses that are never reachable (Blocklist) are
// refused before the policy is asked, whatever it says.
func (p Policy) AllowsAddr(addr netip.Addr) bool {
	if !p.Internet {
		return false
	}
	if len(p.Allow) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, e := range p.Allow {
		if pfx, ok := allowPrefix(e); ok && pfx.Contains(addr) {
			return true
		}
	}
	return false
}

// hasAddrs reports whether the allow list has address entries.
func (p Policy) hasAddrs() bool {
	for _, e := range p.Allow {
		if _, ok := allowPrefix(e); ok {
			return true
		}
	}
	return false
}

// allowPrefix is an address entry of an allow list as a prefix: "1.2.3.4"
// as 1.2.3.4/32, "10.1.0.0/16" as itself (host bits cleared). A name is
// not an address entry.
func allowPrefix(entry string) (netip.Prefix, bool) {
	if pfx, err := netip.ParsePrefix(entry); err == nil {
		return pfx.Masked(), true
	}
	if a, err := netip.ParseAddr(entry); err == nil && a.Zone() == "" {
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

// restricted reports whether the policy names its hosts, so that IP
// literals and connections without a name are refused.
func (p Policy) restricted() bool { return len(p.Allow) > 0 }

// matchHost reports whether the normalized name matches pattern, an exact
// name or a "*." wildcard.
func matchHost(pattern, name string) bool {
	pattern = normalize(pattern)
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasPrefix(suffix, ".") && len(name) > len(suffix) && strings.HasSuffix(name, suffix)
	}
	return pattern != "" && pattern == name
}

// normalize lowercases a name and strips one trailing dot.
func normalize(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// ValidateAllow checks an allow list: host names, a wildcard only as a
// leading "*.", no ports; or addresses and CIDR prefixes, written as
// netip writes them (dotted IPv4, IPv6 but not IPv4-mapped), so that every
// other numeric form (decimal, octal, hex, "127.1") stays refused rather
// than read two ways.
func ValidateAllow(allow []string) error {
	for _, entry := range allow {
		if err := validateAllowEntry(entry); err != nil {
			return fmt.Errorf("%w %q: %s", ErrInvalidAllow, entry, err)
		}
	}
	return nil
}

func validateAllowEntry(entry string) error {
	if pfx, ok := allowPrefix(entry); ok {
		if pfx.Addr().Is4In6() {
			return errors.New("write an IPv4-mapped address in its IPv4 form")
		}
		return nil
	}
	name := normalize(entry)
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name = rest
	}
	switch {
	case name == "":
		return errors.New("empty")
	case strings.Contains(name, "*"):
		return errors.New("a wildcard is allowed only as a leading \"*.\"")
	case isIPLiteral(name):
		return errors.New("an address is written in dotted IPv4 or IPv6 form, a prefix as address/bits")
	case strings.Contains(name, ":"):
		return errors.New("no ports: the entry covers every port")
	}
	return checkHostname(name)
}

// checkHostname checks a normalized name: at most 253 bytes, labels of 1 to
// 63 letters, digits, hyphens or underscores, not starting or ending with
// a hyphen.
func checkHostname(name string) error {
	if len(name) > 253 {
		return errors.New("longer than 253 bytes")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return errors.New("empty label")
		}
		if len(label) > 63 {
			return errors.New("label longer than 63 bytes")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("label starts or ends with a hyphen")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("character %q", c)
			}
		}
	}
	return nil
}

// isIPLiteral reports whether a name is an address rather than a host
// name: anything netip parses (IPv4, IPv6, IPv4-mapped, with or without
// brackets or a zone), and the numeric forms other parsers accept
// (2130706433, 0x7f000001, 127.1, 0177.0.0.1): a name whose last label is
// a number, which no top-level domain is.
func isIPLiteral(name string) bool {
	if _, err := netip.ParseAddrPort(name); err == nil {
		return true
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if strings.Contains(name, ":") {
		return false
	}
	last := name[strings.LastIndexByte(name, '.')+1:]
	return last != "" && isNumber(last)
}

// isNumber reports whether s is a decimal, octal or 0x hexadecimal number.
func isNumber(s string) bool {
	digits := "0123456789"
	if rest, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		s, digits = rest, "0123456789abcdef"
		if s == "" {
			return true
		}
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(digits, rune(s[i])) {
			return false
		}
	}
	return true
}
