// Package buildinfo says which build of withruntime is running: the
// version the CLI prints, and that MCP's handshake reports.
package buildinfo

import "runtime/debug"

// Override, when set (by main, from its -ldflags -X variable), is the
// version every part of the binary reports: the CLI, MCP and /v1/health.
var Override string

// Version returns the build's version: set, when a build flag set it
// (-ldflags "-X main.version=v1.2.3"); else the main module's version when
// it was built as a module (go install ...@v1.2.3), or the pseudo-version
// Go 1.24 and later stamp from the checkout's commit; else, built from a
// checkout, "0.0.0-dev+" and the commit's first 12 hex digits, "-dirty"
// with uncommitted changes; "0.0.0-dev" when nothing is known.
func Version(set string) string {
	if set != "" {
		return set
	}
	if Override != "" {
		return Override
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "0.0.0-dev"
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "0.0.0-dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "0.0.0-dev+" + rev
	if dirty {
		v += "-dirty"
	}
	return v
}
