// Command withruntime is the withruntime command line and, through
// "withruntime serve", its server. main only wires the parts together: the
// client-side commands live in internal/cli, the server-side ones (serve,
// setup, the embedded default server) come in as cli.Hooks.
package main

import (
	"os"

	"github.com/withruntime/withruntime/internal/cli"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	app := &cli.App{
		Version: version,
		Hooks: cli.Hooks{
			Serve:    serve,
			Setup:    runSetup,
			Embedded: embedded,
		},
	}
	os.Exit(app.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
