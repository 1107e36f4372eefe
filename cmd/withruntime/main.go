// Command withruntime is the withruntime command line and, through
// "withruntime serve", its server. main only wires the parts together: the
// client-side commands live in internal/cli, the server-side ones (serve,
// setup) come in as cli.Hooks; the local daemon is this binary's serve.
// Sandboxes need a Linux host, so only the Linux build has the server
// (host_linux.go); elsewhere the same commands, with the same flags and
// help, say so (host_other.go, hostless.go).
package main

import (
	"os"

	"github.com/withruntime/withruntime/internal/buildinfo"
	"github.com/withruntime/withruntime/internal/cli"
)

// version, when set at build time (-ldflags "-X main.version=v1.2.3"), is
// the version reported; else it comes from the build's own information
// (the module's version, or the commit it was built from).
var version = ""

func main() {
	os.Exit(app().Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// app is the command line with this binary's hooks.
func app() *cli.App {
	buildinfo.Override = version
	return &cli.App{Version: buildinfo.Version(version), Hooks: hostHooks()}
}
