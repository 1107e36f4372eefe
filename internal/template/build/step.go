package build

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/withruntime/withruntime/internal/envname"
)

// Step is one build step: exactly one action field is set. On the wire
// each is an object with one action key ({"apt_install": [...]},
// {"run": "...", "user": "root"}, {"copy": {...}}, {"user": "name"}, ...).
type Step struct {
	AptInstall []string `json:"apt_install,omitempty"`
	PipInstall []string `json:"pip_install,omitempty"`
	NpmInstall []string `json:"npm_install,omitempty"`
	// Global installs NpmInstall's packages with -g (as root).
	Global bool   `json:"global,omitempty"`
	Run    string `json:"run,omitempty"`
	// User is the user a Run runs as ("" is the build's current user), or,
	// alone in a step, the user step: the user later steps run as and the
	// template's default user.
	User    string            `json:"user,omitempty"`
	Copy    *Copy             `json:"copy,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	// NoCache runs this step and every later one without looking them up
	// in the cache (E2B's skipCache from a point on).
	NoCache bool `json:"no_cache,omitempty"`
	// Line is the Dockerfile line the step came from (0 for a spec's own).
	Line int `json:"-"`
}

// Copy copies Src of the build context to Dest in the template. A
// directory's contents go into Dest; a file goes to Dest, or into it when
// Dest ends in "/". User owns what is copied ("" the build's current
// user); Mode ("0755"), when set, replaces the copied entries' permissions.
type Copy struct {
	Src  string `json:"src"`
	Dest string `json:"dest"`
	User string `json:"user,omitempty"`
	Mode string `json:"mode,omitempty"`
}

// Kinds of step, named as their JSON key.
const (
	KindApt     = "apt_install"
	KindPip     = "pip_install"
	KindNpm     = "npm_install"
	KindRun     = "run"
	KindCopy    = "copy"
	KindEnv     = "env"
	KindWorkdir = "workdir"
	KindUser    = "user"
)

// actionKeys are the keys of which a step has exactly one ("user" is an
// action only when alone).
var actionKeys = []string{KindApt, KindPip, KindNpm, KindRun, KindCopy, KindEnv, KindWorkdir}

// Kind is the step's action, or "" when it has none.
func (s Step) Kind() string {
	k := s.kinds()
	if len(k) == 1 {
		return k[0]
	}
	return ""
}

func (s Step) kinds() []string {
	var k []string
	if s.AptInstall != nil {
		k = append(k, KindApt)
	}
	if s.PipInstall != nil {
		k = append(k, KindPip)
	}
	if s.NpmInstall != nil {
		k = append(k, KindNpm)
	}
	if s.Run != "" {
		k = append(k, KindRun)
	}
	if s.Copy != nil {
		k = append(k, KindCopy)
	}
	if s.Env != nil {
		k = append(k, KindEnv)
	}
	if s.Workdir != "" {
		k = append(k, KindWorkdir)
	}
	if len(k) == 0 && s.User != "" {
		k = append(k, KindUser)
	}
	return k
}

// MakesLayer reports whether the step changes files (and so ends in a
// layer); env, workdir and user steps change only what later steps and the
// template's defaults see.
func (s Step) MakesLayer() bool {
	switch s.Kind() {
	case KindEnv, KindWorkdir, KindUser:
		return false
	}
	return true
}

// The package name rules, one per package manager: what its names and
// version pins may hold, and nothing a shell treats specially, no space and
// no leading '-' (which would be an option). URLs and local paths are
// refused for pip and npm: a run step installs from those.
var (
	aptRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]*(:[a-z0-9-]+)?(=[A-Za-z0-9.+~:-]+|/[A-Za-z0-9.-]+)?$`)
	pipRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?((==|===|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!_-]+)*(,(==|===|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!_-]+)*$`)
	npmRE = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*(@[A-Za-z0-9.^~<>=*+_-]+)?$`)
)

func checkPackages(field string, names []string, re *regexp.Regexp, what string) error {
	if len(names) == 0 {
		return fieldErr(field, "no packages")
	}
	if len(names) > MaxPackages {
		return fieldErr(field, "%d packages, at most %d", len(names), MaxPackages)
	}
	for i, n := range names {
		if len(n) > MaxPackageBytes || !re.MatchString(n) {
			return fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q is not a %s package name (no spaces, shell characters, URLs or leading '-')", n, what)
		}
	}
	return nil
}

func (s Step) validate(field string) error {
	k := s.kinds()
	switch {
	case len(k) == 0:
		return fieldErr(field, "no action: give one of %s, or user alone", strings.Join(actionKeys, ", "))
	case len(k) > 1:
		return fieldErr(field, "one action a step, got %s", strings.Join(k, " and "))
	}
	if s.Global && k[0] != KindNpm {
		return fieldErr(field+".global", "only an npm_install step takes global")
	}
	if s.User != "" && k[0] != KindRun && k[0] != KindUser {
		return fieldErr(field+".user", "only a run step takes a user (a user step is {\"user\": NAME} alone; a copy's owner is copy.user)")
	}
	switch k[0] {
	case KindApt:
		return checkPackages(field+".apt_install", s.AptInstall, aptRE, "Debian")
	case KindPip:
		return checkPackages(field+".pip_install", s.PipInstall, pipRE, "pip")
	case KindNpm:
		return checkPackages(field+".npm_install", s.NpmInstall, npmRE, "npm")
	case KindRun:
		if err := checkText(s.Run, MaxCommandBytes); err != nil {
			return fieldErr(field+".run", "%s", err)
		}
		if strings.TrimSpace(s.Run) == "" {
			return fieldErr(field+".run", "empty")
		}
		if s.User != "" {
			if err := checkUser(s.User); err != nil {
				return fieldErr(field+".user", "%s", err)
			}
		}
	case KindCopy:
		c := s.Copy
		if _, err := contextPath(c.Src); err != nil {
			return fieldErr(field+".copy.src", "%s", err)
		}
		if err := checkAbs(c.Dest); err != nil {
			return fieldErr(field+".copy.dest", "%s", err)
		}
		if c.User != "" {
			if err := checkUser(c.User); err != nil {
				return fieldErr(field+".copy.user", "%s", err)
			}
		}
		if c.Mode != "" && !modeRE.MatchString(c.Mode) {
			return fieldErr(field+".copy.mode", "%q is not an octal mode such as 0644 or 755", c.Mode)
		}
	case KindEnv:
		if len(s.Env) == 0 {
			return fieldErr(field+".env", "empty")
		}
		if len(s.Env) > MaxEnvPerStep {
			return fieldErr(field+".env", "%d variables, at most %d", len(s.Env), MaxEnvPerStep)
		}
		for n, v := range s.Env {
			if !envname.Valid(n) {
				return fieldErr(field+".env", "bad name %q: letters, digits and '_', not starting with a digit", n)
			}
			if err := checkText(v, MaxEnvValueBytes); err != nil {
				return fieldErr(field+".env."+n, "%s", err)
			}
		}
	case KindWorkdir:
		if err := checkAbs(s.Workdir); err != nil {
			return fieldErr(field+".workdir", "%s", err)
		}
	case KindUser:
		if err := checkUser(s.User); err != nil {
			return fieldErr(field+".user", "%s", err)
		}
	}
	return nil
}
