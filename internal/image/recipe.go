package image

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Recipe says how to build an image with mmdebstrap.
type Recipe struct {
	Suite    string
	Variant  string
	Packages []string
	// Hooks run in order as mmdebstrap customize hooks; "$1" is the root.
	Hooks []string
}

// Default is the recipe of the default image: Debian 13 with Python, pip,
// venv, sudo, git and curl, the tools to build software (Node.js and npm,
// Go, gcc and make, sqlite3, unzip, jq, less), an IPython kernel with
// numpy, pandas and matplotlib for the code interpreter, and an unprivileged user
// "user" (uid 1000) who owns /workspace and may sudo without a password.
var Default = Recipe{
	Suite:   "trixie",
	Variant: "minbase",
	Packages: []string{
		"python3", "python3-pip", "python3-venv", "sudo", "ca-certificates",
		// `python` runs python3, as E2B's and most images' does.
		"python-is-python3",
		"curl", "git", "procps", "iproute2",
		// Building software: the documents promise npm test, go build and
		// sqlite3 work out of the box.
		"nodejs", "npm", "golang-go", "build-essential", "sqlite3",
		"unzip", "jq", "less",
		// The code interpreter (run_code) runs an IPython kernel, and data
		// agents expect the usual libraries to be there.
		"python3-ipykernel", "python3-jupyter-client", "python3-numpy",
		"python3-pandas", "python3-matplotlib",
	},
	Hooks: []string{
		`chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash user`,
		`echo 'user ALL=(ALL) NOPASSWD:ALL' > "$1/etc/sudoers.d/user" && chmod 0440 "$1/etc/sudoers.d/user"`,
		`mkdir -p "$1/workspace" "$1/opt/withruntime" "$1/run/withruntime" && chown 1000:1000 "$1/workspace"`,
		`echo sandbox > "$1/etc/hostname" && printf '127.0.0.1 localhost\n127.0.1.1 sandbox\n::1 localhost\n' > "$1/etc/hosts"`,
		// The sandbox is the user's machine: `pip install --user` must work
		// without a venv, which Debian's PEP 668 marker would refuse.
		`printf '[global]\nbreak-system-packages = true\n' > "$1/etc/pip.conf"`,
	},
}

// Key is the content key of the recipe: the same recipe always builds into
// the same cache entry.
func (r Recipe) Key() string {
	h := sha256.New()
	h.Write([]byte("v1\x00" + r.Suite + "\x00" + r.Variant + "\x00"))
	h.Write([]byte(strings.Join(r.Packages, ",") + "\x00"))
	h.Write([]byte(strings.Join(r.Hooks, "\x00")))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Args are mmdebstrap's arguments for building the recipe into out.
func (r Recipe) Args(out string) []string {
	args := []string{"--variant=" + r.Variant, "--include=" + strings.Join(r.Packages, ",")}
	for _, h := range r.Hooks {
		args = append(args, "--customize-hook="+h)
	}
	// No mirror argument: mmdebstrap uses Debian's default.
	return append(args, r.Suite, out)
}
