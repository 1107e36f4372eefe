package sandbox

// EnvName reports whether name can name a variable of a sandbox's
// environment: letters, digits and '_', not starting with a digit. Env
// relies on it (WITHRUNTIME_ENV_KEYS joins the names with commas). It is
// the rule of api.EnvName, which the wire's users (the CLI, secrets) call;
// a test holds the two to each other, as this package may not import api.
func EnvName(name string) bool {
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
