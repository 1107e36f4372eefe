package api

// EnvName reports whether name can name an environment variable of a
// sandbox (its create-time env, an exec's env, a secret): letters, digits
// and '_', not starting with a digit.
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
