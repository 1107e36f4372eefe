package agentlink

// The variables of the agent process's environment that tell it a
// template's defaults. They are not the sandbox's environment, which the
// variable WITHRUNTIME_ENV_KEYS names, so no command sees them.
const (
	// WorkdirVar is the directory commands and relative paths start from
	// (default /workspace); the agent makes it if the image lacks it.
	WorkdirVar = "WITHRUNTIME_WORKDIR"
	// UserVar is whom a command that names no user runs as: "user" (the
	// default) or "root".
	UserVar = "WITHRUNTIME_USER"
)

// DefaultsEnv is what the agent's process environment says of a
// template's defaults: workdir and user, each only when set.
func DefaultsEnv(workdir, user string) []string {
	var out []string
	if workdir != "" {
		out = append(out, WorkdirVar+"="+workdir)
	}
	if user != "" {
		out = append(out, UserVar+"="+user)
	}
	return out
}
