package sandbox

import (
	"sort"
	"strings"
)

// DefaultPath is the PATH a sandbox's agent starts with.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Env is the environment a sandbox's agent starts with, the same on every
// tier: PATH, the create request's variables (vars) sorted by name, the
// trust store's variables (trust, CAEnv where the sandbox trusts the
// platform's authority) that vars does not set, and WITHRUNTIME_ENV_KEYS
// naming the variables of vars and trust given, which the agent takes into
// every command's environment (the rest of its own, such as HOME, is not
// the user's).
func Env(vars map[string]string, trust []string) []string {
	env := []string{"PATH=" + DefaultPath}
	keys := make([]string, 0, len(vars)+len(trust))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	for _, kv := range trust {
		k, _, _ := strings.Cut(kv, "=")
		if _, set := vars[k]; !set {
			env = append(env, kv)
			keys = append(keys, k)
		}
	}
	return append(env, "WITHRUNTIME_ENV_KEYS="+strings.Join(keys, ","))
}
