package secrets

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// Bounds of a secret.
const (
	MaxNameLen    = 128
	MaxValueBytes = 16 << 10
	MaxHostLen    = 253
	// MaxPerAccount bounds an account's secrets: each is set in the
	// environment of every command of the account's sandboxes.
	MaxPerAccount = 100
)

// reservedNames are variables the system or the platform sets in a
// sandbox's commands (the trust store's variables among them): a secret of
// that name would replace them with its placeholder and break every
// command.
var reservedNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "TERM", "LANG", "TMPDIR", "HOSTNAME",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
	"PIP_CERT", "GIT_SSL_CAINFO",
}

// reservedPrefixes name families of such variables.
var reservedPrefixes = []string{"WITHRUNTIME_", "LD_"}

func invalid(format string, args ...any) error {
	return sandbox.Errorf(sandbox.KindInvalid, format, args...)
}

// checkNameSyntax accepts an environment variable name:
// [A-Za-z_][A-Za-z0-9_]*, at most MaxNameLen long. A refused name is not
// echoed: it may be a value given in the wrong place.
func checkNameSyntax(name string) error {
	if name == "" {
		return invalid("name is required")
	}
	if len(name) > MaxNameLen {
		return invalid("name must be at most %d characters", MaxNameLen)
	}
	if !api.EnvName(name) {
		return invalid("name must be an environment variable name: letters, digits and '_', not starting with a digit")
	}
	return nil
}

// CheckName checks a name for a new secret: its syntax, and that the
// platform does not set that variable itself.
func CheckName(name string) error {
	if err := checkNameSyntax(name); err != nil {
		return err
	}
	if slices.Contains(reservedNames, name) {
		return invalid("%s is set by the system or the platform in every command: choose another name", name)
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return invalid("names starting with %s are the platform's: choose another name", p)
		}
	}
	return nil
}

// NormalizeHost checks the host a secret is bound to and returns it in
// lower case: a DNS name, or "*." and a DNS name of at least two labels for
// every name under it. IP literals, ports, schemes and paths are refused. A
// refused host is not echoed: it may be a value given in the wrong place.
func NormalizeHost(host string) (string, error) {
	if host == "" {
		return "", invalid("host is required: the name of the HTTPS server the secret is for, such as api.openai.com")
	}
	if len(host) > MaxHostLen+2 {
		return "", invalid("host must be at most %d characters", MaxHostLen)
	}
	h := strings.ToLower(host)
	wild := strings.HasPrefix(h, "*.")
	name := strings.TrimPrefix(h, "*.")
	name = strings.TrimSuffix(name, ".") // the root's dot: a TLS server name has none
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")); err == nil {
		return "", invalid("host must be a DNS name, not an IP address")
	}
	switch {
	case strings.Contains(name, "://") || strings.ContainsAny(name, "/?#@"):
		return "", invalid("host must be a bare name such as api.openai.com, without a scheme or a path")
	case strings.Contains(name, ":"):
		return "", invalid("host must be a name without a port: the secret is swapped in on HTTPS to that name on any port")
	case strings.Contains(name, "*"):
		return "", invalid(`host may have a wildcard only as its first label, as in *.example.org`)
	case len(name) == 0 || len(name) > MaxHostLen:
		return "", invalid("host must be a DNS name of 1 to %d characters", MaxHostLen)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return "", err
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return "", invalid("host must be a DNS name, not an IP address")
	}
	if wild && len(labels) < 2 {
		return "", invalid("a wildcard host needs at least two labels after *., as in *.example.org")
	}
	if wild {
		return "*." + name, nil
	}
	return name, nil
}

func checkLabel(l string) error {
	if l == "" || len(l) > 63 {
		return invalid("host must be a DNS name: labels of 1 to 63 characters between dots")
	}
	for _, c := range []byte(l) {
		switch {
		case c >= 0x80:
			return invalid("host must be in ASCII: give an international name in its xn-- (punycode) form")
		case !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-'):
			return invalid("host must be a DNS name: letters, digits and '-' in labels between dots")
		}
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return invalid("host must be a DNS name: no label starts or ends with '-'")
	}
	return nil
}

// CheckValue checks a secret's value: not empty, at most MaxValueBytes,
// and fit for an HTTP header (no NUL, line break or other control
// character but tab). The message never quotes the value.
func CheckValue(v string) error {
	if v == "" {
		return invalid("value is empty")
	}
	if len(v) > MaxValueBytes {
		return invalid("value is larger than %d bytes", MaxValueBytes)
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == 0:
			return invalid("value contains a NUL byte")
		case c == '\n' || c == '\r':
			return invalid("value contains a line break (pass it with printf %%s, not echo, which adds one)")
		case c < 0x20 && c != '\t' || c == 0x7f:
			return invalid("value contains a control character: it must fit in an HTTP header")
		}
	}
	return nil
}
