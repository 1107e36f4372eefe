package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/withruntime/withruntime/internal/buildinfo"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1   // any command but run and exec: something failed
	exitUsage    = 2   // bad arguments, as the flag package does
	exitTimedOut = 124 // run, exec: the command's timeout killed it, no code reported
	exitPlatform = 125 // run, exec: the platform failed, as docker run does
)

// Hooks are the parts of the binary that live outside this package: the
// server and what sets a machine up. A nil hook makes its command fail with
// not_supported.
type Hooks struct {
	// Serve is "withruntime serve".
	Serve Hook
	// Setup is "withruntime setup".
	Setup Hook
	// Node is "withruntime node", a node daemon of a many-host
	// installation.
	Node Hook
	// Daemon returns the binary whose "serve" runs the local daemon,
	// started when WITHRUNTIME_BASE_URL is unset and nothing answers on
	// the default address (see daemon.go).
	Daemon func() (string, error)
	// NoDaemon, with Daemon nil, says why this machine has no local
	// daemon and what to do instead; a command that finds no server
	// prints it. Empty: the build just cannot start one.
	NoDaemon string
}

// App is the command line with its hooks.
type App struct {
	Hooks   Hooks
	Version string // printed by "withruntime version"; the build's own (buildinfo) when empty

	// defaultBaseURL replaces client.DefaultBaseURL as the address probed
	// before starting the local daemon (tests only).
	defaultBaseURL string
	stderr         io.Writer // Main's, for the daemon's "started" line
}

// Main runs the command line without hooks: serve, setup and the local
// daemon are not available.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return (&App{}).Main(args, stdin, stdout, stderr)
}

// streams are a command's standard files.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// Main runs the command line: args are the arguments after the program's
// name. It returns the exit code.
func (a *App) Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := streams{stdin: stdin, stdout: stdout, stderr: stderr}
	a.stderr = stderr
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	return a.execute(s, args)
}

func (a *App) version() string {
	return buildinfo.Version(a.Version)
}

// stopSignals end a sandbox command early: it cleans up ("sandbox run"
// stops its sandbox) and exits with 128 plus the signal's number.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// signalContext is canceled by the first of stopSignals. After it, the
// signals kill the process again, so a second Ctrl-C does not wait for the
// cleanup. SIGPIPE is ignored meanwhile: a closed stdout (as in "| head")
// then fails the write, and run still stops its sandbox.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	signal.Ignore(syscall.SIGPIPE)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, func() {
		stop()
		signal.Reset(syscall.SIGPIPE)
	}
}

// signalExitCode returns 128 plus the number of the signal that ended ctx,
// or 0 when no signal did.
func signalExitCode(ctx context.Context) int {
	cause := context.Cause(ctx)
	if cause == nil {
		return 0
	}
	// os/signal names the signal only in the cause's text.
	for _, sig := range stopSignals {
		if cause.Error() == sig.String()+" signal received" {
			if n, ok := sig.(syscall.Signal); ok {
				return 128 + int(n)
			}
		}
	}
	return 0
}

const usageLine = "usage: withruntime COMMAND [ARGS] (\"withruntime --help\" lists the commands)\n"

const usage = `usage: withruntime COMMAND [ARGS]

Sandboxes:
  sandbox run [flags] -- CMD [ARG...]      create a sandbox, run CMD in it, stop it
  sandbox create [flags]                   create a sandbox and print its id
  sandbox exec ID [flags] -- CMD [ARG...]  run CMD in a running sandbox
  sandbox shell ID                         an interactive shell in a running sandbox (exec -it: a terminal)
  sandbox ls                               list live sandboxes (-a: also those ended in the last 24 hours)
  sandbox get ID                           show one sandbox
  sandbox stop ID...                       stop sandboxes (removes paused ones; also: rm)
  sandbox pause ID                         checkpoint a sandbox, freeing its memory and CPU
  sandbox resume ID                        bring a paused sandbox back
  sandbox extend ID --timeout D            make a running sandbox's lease last at least D
  sandbox egress ID                        allowed and refused connections of a sandbox
  sandbox top ID                           CPU, memory, disk and network use of a sandbox, refreshing like top
  sandbox network ID [--internet|--off]    show or change the network of a live sandbox
  sandbox cp SRC DST                       copy files and directories to or from ID:PATH, like docker cp
  sandbox ps ID                            list the background processes of a sandbox (exec -d starts them)
  sandbox logs [-f] ID PID                 print the output of a background process (-f: follow it)
  sandbox kill ID PID...                   kill background processes with their children
  sandbox snapshot ID                      save a running sandbox's memory and disk (-t NAME: a template of its files)
  sandbox fork ID -n N                     start N sandboxes that go on from where a running sandbox is
  sandbox port-forward ID [LOCAL:]REMOTE   forward local TCP ports to ports of a sandbox, like kubectl port-forward
  sandbox expose ID PORT [--private]       make a port's preview URL public (--private: private again)
  sandbox preview-url ID PORT              print a URL that opens a port of a sandbox in a browser
  sandbox preview-revoke ID                make every preview token of a sandbox stop working

Templates (what sandboxes start from: sandbox run|create --template NAME):
  template build -t NAME[:TAG] [CONTEXT]  build a template from a Dockerfile or build steps, on the server
  template import -t NAME[:TAG] ARCHIVE    make a template from an image archive (docker save, OCI archive)
  template ls                              list templates
  template get NAME[:TAG]                  show one template
  template rm NAME[:TAG]...                remove templates
  template publish NAME[:TAG]              show an admin template to every account (admin key)

Volumes (sandbox run|create --volume NAME:/PATH[:ro]):
  volume create NAME --size-gib N          make a named persistent volume
  volume ls                                list volumes
  volume rm NAME...                        remove volumes and their files
  volume cp SRC DST                        copy a file or directory to or from NAME:/PATH, without a sandbox

Snapshots (sandboxes saved whole: sandbox snapshot, sandbox run|create --snapshot ID):
  snapshot ls                              list snapshots
  snapshot get ID                          show one snapshot
  snapshot rm ID...                        remove snapshots

Secrets:
  secrets set NAME --host HOST             store a secret (typed, or on stdin), sent only to HOST
  secrets ls                               list secrets (names and hosts, never values)
  secrets rm NAME...                       remove secrets

Accounts, keys and money:
  accounts create NAME                     create an account (admin key)
  accounts ls                              list accounts (admin key)
  keys create                              create an API key and print it
  keys ls                                  list API keys (never their secrets)
  keys rm ID...                            remove API keys
  usage                                    usage and cost per day, account and key

Server:
  serve                                    run the server (default address 127.0.0.1:7878)
  setup                                    prepare this machine to run sandboxes
  node                                     run a node daemon: this machine's sandboxes for a many-host installation
  daemon start                             start the local daemon if it does not run (the SDKs do this too)
  daemon status                            whether the local daemon runs (pid, address, data dir, log)
  daemon stop                              stop the local daemon
  sdk python                               print the pip command that installs the Python SDK from your server
  sdk typescript                           print the npm command that installs the TypeScript SDK from your server
  mcp                                      serve the sandbox tools to an MCP client over stdio

  version                                  print the version
  completion bash|zsh|fish|powershell      print a shell completion script

"withruntime sandbox --help" lists the sandbox commands (the other nouns:
the same), "withruntime sandbox run --help" shows a command's flags (any
command: the same); --json prints results as JSON. --trial on sandbox
commands uses a trial account on a server: its key is obtained the first
time and kept in $XDG_CONFIG_HOME/withruntime/config.json.

Environment:
  WITHRUNTIME_BASE_URL  the server; when unset, http://127.0.0.1:7878, where
                        the local daemon is started if nothing answers
  WITHRUNTIME_API_KEY   the API key; when unset, the local daemon's admin key
                        ($XDG_DATA_HOME/withruntime/admin.key) on the default
                        address, else a trial key stored by --trial

Exit status: run and exec exit with the command's own code (124 when its
timeout killed it without one) and 125 when the platform fails; other
commands exit 1 on failure. Failures print "error: CODE: message" on stderr.
Usage errors exit 2.
`
