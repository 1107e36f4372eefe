package build

import "strings"

// Quote returns s as one word of a POSIX shell command: unchanged when it
// holds only characters no shell treats specially, otherwise in single
// quotes, each single quote in s closing the quotes, escaped with a
// backslash, and reopening them. Inside single quotes a
// shell expands nothing ($, `, \, ;, newlines are all literal), so the
// word reaches the program as s exactly.
func Quote(s string) string {
	if s != "" && strings.Trim(s, safeChars) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

const safeChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-"

// QuoteArgv joins argv into one shell command that runs exactly that argv.
func QuoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// The users a build step names specially: a sandbox's exec runs as one of
// these two directly (api.UserRoot, api.UserDefault).
const (
	UserRoot    = "root"
	UserDefault = "user"
)

// Command returns the shell command (for /bin/sh -c) a step runs in the
// build's sandbox, and the user it runs as: "" means the build's current
// user (the last user step, or the base's). Steps that run nothing (copy,
// env, workdir, user) return "", "".
//
// Package names are never spliced into the command as text: each is one
// argument, quoted by Quote, after being checked against the package
// manager's name rules (no leading '-', no shell metacharacters), so a
// name can neither end the command nor pass an option.
func (s Step) Command() (cmd, user string) {
	switch s.Kind() {
	case KindApt:
		// apt-get has no "--" end of options; the names were checked not
		// to start with '-'. The lists are removed so the layer holds the
		// packages, not the index.
		return "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " +
			QuoteArgv(s.AptInstall) + " && rm -rf /var/lib/apt/lists/*", UserRoot
	case KindPip:
		// As root, into the system's site-packages, so every user of the
		// template imports them.
		return "python3 -m pip install --no-cache-dir " + QuoteArgv(s.PipInstall), UserRoot
	case KindNpm:
		if s.Global {
			return "npm install -g " + QuoteArgv(s.NpmInstall), UserRoot
		}
		return "npm install " + QuoteArgv(s.NpmInstall), ""
	case KindRun:
		return s.Run, s.User
	}
	return "", ""
}

// RunAs turns a command meant for user into one a sandbox's exec can run:
// exec runs as UserRoot or UserDefault only, so any other user's command
// runs as root through su (in every Debian and busybox image), which
// switches to that user without a password and runs the command with
// /bin/sh. An empty user is returned as is: the caller has already put the
// build's current user in its place.
func RunAs(cmd, user string) (execCmd, execUser string) {
	switch user {
	case "", UserRoot, UserDefault:
		return cmd, user
	}
	return "su -s /bin/sh " + Quote(user) + " -c " + Quote(cmd), UserRoot
}
