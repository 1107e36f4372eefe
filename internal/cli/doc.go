// Package cli is the withruntime command line: it parses arguments, calls
// the Go client (package client) and prints results, and maps failures to
// exit codes. main in cmd/withruntime only wires it up.
//
// It is a thin layer over package client and must not import the server's
// packages (internal/httpapi, internal/manager, internal/backend,
// internal/store): the server-side commands (serve, setup) and the binary
// that runs the local daemon come in through Hooks, so this package builds
// and tests without them.
//
// The commands (tree.go) are cobra commands, one per noun and verb, built
// from tables of values (use, help, flags, run) so that help, completion
// and docs/CLI.md come from one place and a test walks the tree. Flags are
// GNU style (pflag): --json, never -json. cobra prints nothing itself:
// errors, usage errors and exit codes stay this package's.
//
// The local daemon (daemon.go): with WITHRUNTIME_BASE_URL unset and nothing
// answering on the default address, a command starts "withruntime serve"
// detached on that address, data dir $XDG_DATA_HOME/withruntime, and talks
// to it like any server; "daemon status|stop" show and stop it.
//
// Exit codes: "sandbox run" and "sandbox exec" exit with the command's own
// code (124 when its timeout killed it and the server reported no code),
// and 125 when the platform fails (refused, unreachable, broken stream);
// every other command exits 1 on failure. Failures print one line on
// stderr, "error: CODE: message", CODE being the server's stable code or
// "unavailable" when the server could not be reached. Usage errors (flag
// errors among them) print "NOUN VERB: message", the usage line and a
// pointer to --help on stderr and exit 2; --help prints the command's help
// on stdout and exits 0.
//
// --trial (sandbox commands, secrets, usage): on a server, when WITHRUNTIME_API_KEY is
// unset, the command uses the trial key stored for the server's base URL in
// $XDG_CONFIG_HOME/withruntime/config.json ({"trial_keys": {URL: KEY}});
// "sandbox run" and "sandbox create" obtain one (POST /v1/trial) and store it
// when there is none. Later commands use the stored key without --trial
// when no key is set. With the local daemon's admin key, or with a key set,
// --trial changes nothing.
package cli
