// Package envname holds the one rule for the names of a sandbox's
// environment variables. Both the wire contract (api.EnvName, which the CLI,
// the secrets and the HTTP edge call) and the domain (sandbox.EnvName, which
// the manager and sandbox.Env call) answer with it; neither may import the
// other, so the rule lives below both. It imports only the standard library.
package envname

// Valid reports whether name can name an environment variable of a sandbox
// (its create-time env, an exec's env, a secret): ASCII letters, digits and
// '_', not starting with a digit. Commas and '=' are never part of a name,
// which sandbox.Env relies on when it joins names with commas.
func Valid(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range []byte(name) {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
