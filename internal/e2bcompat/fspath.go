package e2bcompat

import (
	"path"
	"strings"
)

// E2B's clients name paths relative to the home of the user they act as;
// withruntime's API puts relative paths under /workspace, so every path is
// made absolute here before it leaves.

func homeOf(user string) string {
	if user == UserRoot {
		return "/root"
	}
	return "/home/user"
}

// resolvePath makes p absolute against user's home: "" and "~" are the
// home, "~/x" and "x" are under it. The result is clean; ".." cannot climb
// above "/", and the sandbox, not this layer, decides what may be read.
func resolvePath(user, p string) string {
	home := homeOf(user)
	switch {
	case p == "" || p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		p = home + p[1:]
	case !strings.HasPrefix(p, "/"):
		p = home + "/" + p
	}
	return path.Clean(p)
}
