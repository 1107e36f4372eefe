// Package agent is the daemon inside every sandbox: an http.Handler that
// runs commands as the sandbox user, keeps background processes, and reads
// and writes files and tar archives, serving the sandbox routes of package
// api without their "/v1/sandboxes/{id}" prefix. As the sandbox's PID 1 it
// also reaps the orphans re-parented to it (ReapOrphans).
//
// It ships into every sandbox as a static binary, so it imports only the
// standard library, golang.org/x/sys/unix, github.com/creack/pty (its
// terminals, pty.go), the module's api package,
// internal/tarx (the tar extractor it shares with the client) and
// internal/lines (the capped-line reader), both standard library only:
// never internal/sandbox, the manager, the backends or the server.
//
// Paths come from the client and are resolved inside the sandbox, where the
// sandbox itself is the security boundary (its user has sudo). The checks
// here keep requests well formed and keep archives from writing outside
// their destination; they do not fence the user off from the sandbox. The
// files routes act as the user they name (the sandbox user by default, root
// with user=root), so that the sandbox's kernel applies that user's
// permissions, as it does to a command of that user (actas.go).
package agent
