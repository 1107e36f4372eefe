package build

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/withruntime/withruntime/internal/envname"
	"github.com/withruntime/withruntime/internal/template"
)

// Bounds of a build specification. A spec is held in memory whole and
// every step is a sandbox exec, so each part has a ceiling.
const (
	MaxSpecBytes        = 8 << 20   // the JSON body without the context
	MaxDockerfileBytes  = 256 << 10 // a Dockerfile's text
	MaxSteps            = 100
	MaxCommandBytes     = 64 << 10 // a run command, start_cmd, ready_cmd
	MaxPackages         = 256      // names in one install step
	MaxPackageBytes     = 256
	MaxEnvPerStep       = 128
	MaxEnvValueBytes    = 32 << 10
	MaxPathBytes        = 4096
	MaxBuildArgs        = 128
	MaxAllow            = 64
	MaxReadyTimeoutSecs = 600 // a create waits at most this for a template's ready command (manager)
)

// Spec is the body of POST /v1/templates: what to build and the defaults
// of the template it makes. Either From and Steps, or Dockerfile (which
// parses into them, with BuildArgs for its ARGs): never both.
type Spec struct {
	// Name is "name" or "name:tag" (template.ParseRef), not "default".
	Name string `json:"name"`
	// From is the base; absent means {"template": "default"}.
	From  *From  `json:"from,omitempty"`
	Steps []Step `json:"steps,omitempty"`
	// Dockerfile is a Dockerfile's text, the alternative to From and
	// Steps; BuildArgs are its --build-arg values.
	Dockerfile string            `json:"dockerfile,omitempty"`
	BuildArgs  map[string]string `json:"build_args,omitempty"`
	// StartCmd, ReadyCmd, ReadyTimeoutSeconds, VCPUs and MemoryMiB become
	// the template's defaults (template.Defaults). A StartCmd here wins
	// over a Dockerfile's CMD/ENTRYPOINT.
	StartCmd            string `json:"start_cmd,omitempty"`
	ReadyCmd            string `json:"ready_cmd,omitempty"`
	ReadyTimeoutSeconds int    `json:"ready_timeout_seconds,omitempty"`
	VCPUs               int    `json:"vcpus,omitempty"`
	MemoryMiB           int    `json:"memory_mib,omitempty"`
	// Network is the egress of the build's sandboxes: none when absent.
	Network *Network `json:"network,omitempty"`
	// NoCache runs every step, looking none up in the cache (their
	// results are still stored for the next build).
	NoCache bool `json:"no_cache,omitempty"`
}

// From is a build's base: exactly one of a template ("default", the
// built-in image, or "name[:tag]"), an OCI image reference, or the path of
// an image archive (docker save, OCI archive) inside the build context.
type From struct {
	Template string `json:"template,omitempty"`
	Image    string `json:"image,omitempty"`
	Archive  string `json:"archive,omitempty"`
}

// Network is the egress of a build's sandboxes, api.Network's shape:
// nothing without Internet; with it every public address, or only the host
// names in Allow. The entries are checked where the policy is applied
// (egress.ValidateAllow); here only their number and size.
type Network struct {
	Internet bool     `json:"internet"`
	Allow    []string `json:"allow,omitempty"`
}

// Decode reads and checks a JSON build specification. Unknown fields, a
// step with no action or two, and every bad value are refused with an
// *Error naming the field ("steps[2].copy.dest").
func Decode(data []byte) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, fieldErr("", "the build specification is larger than %d bytes", MaxSpecBytes)
	}
	// The steps are decoded one by one so that a mistake in one is named
	// by its index, and so that a key given empty ({"run": ""}) is told
	// apart from one not given.
	type wire struct {
		Spec
		Steps []json.RawMessage `json:"steps,omitempty"`
	}
	var w wire
	if err := strictUnmarshal(data, &w); err != nil {
		return nil, fieldErr("", "%s", jsonMsg(err))
	}
	s := w.Spec
	if len(w.Steps) > MaxSteps {
		return nil, fieldErr("steps", "%d steps, at most %d", len(w.Steps), MaxSteps)
	}
	s.Steps = nil
	for i, raw := range w.Steps {
		st, err := decodeStep(fmt.Sprintf("steps[%d]", i), raw)
		if err != nil {
			return nil, err
		}
		s.Steps = append(s.Steps, st)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func decodeStep(field string, raw json.RawMessage) (Step, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return Step{}, fieldErr(field, "a step is an object with one action key (%s, or user alone)", strings.Join(actionKeys, ", "))
	}
	var actions []string
	for k, v := range keys {
		if !slices.Contains(actionKeys, k) && k != "user" && k != "global" && k != "no_cache" {
			return Step{}, fieldErr(field, "unknown key %q", k)
		}
		if string(bytes.TrimSpace(v)) == "null" {
			return Step{}, fieldErr(field+"."+k, "null")
		}
		if slices.Contains(actionKeys, k) {
			actions = append(actions, k)
		}
	}
	slices.Sort(actions)
	switch {
	case len(actions) > 1:
		return Step{}, fieldErr(field, "one action a step, got %s", strings.Join(actions, " and "))
	case len(actions) == 0 && keys["user"] == nil:
		return Step{}, fieldErr(field, "no action: give one of %s, or user alone", strings.Join(actionKeys, ", "))
	}
	var st Step
	if err := strictUnmarshal(raw, &st); err != nil {
		return Step{}, fieldErr(field, "%s", jsonMsg(err))
	}
	// Empty strings decode to the zero value, which Kind reads as absent:
	// name them here, where the key is still known.
	for _, k := range []string{KindRun, KindWorkdir, "user"} {
		if v, ok := keys[k]; ok && string(bytes.TrimSpace(v)) == `""` {
			return Step{}, fieldErr(field+"."+k, "empty")
		}
	}
	return st, nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

// jsonMsg is encoding/json's error without its "json: " prefix.
func jsonMsg(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// Validate checks a spec made in Go (Decode calls it too).
func (s *Spec) Validate() error {
	ref, err := template.ParseRef(s.Name)
	if err != nil {
		return fieldErr("name", "%s", err)
	}
	if ref.Name == template.DefaultBase {
		return fieldErr("name", "%q is the built-in image; give the template another name", ref.Name)
	}
	if s.Dockerfile != "" {
		if s.From != nil || len(s.Steps) > 0 {
			return fieldErr("dockerfile", "give a Dockerfile or from and steps, not both")
		}
		if len(s.Dockerfile) > MaxDockerfileBytes {
			return fieldErr("dockerfile", "larger than %d bytes", MaxDockerfileBytes)
		}
		if len(s.BuildArgs) > MaxBuildArgs {
			return fieldErr("build_args", "%d build args, at most %d", len(s.BuildArgs), MaxBuildArgs)
		}
		for k, v := range s.BuildArgs {
			if !envname.Valid(k) {
				return fieldErr("build_args", "bad name %q: letters, digits and '_', not starting with a digit", k)
			}
			if err := checkText(v, MaxEnvValueBytes); err != nil {
				return fieldErr("build_args."+k, "%s", err)
			}
		}
		// The text's own mistakes are found now, when the build is asked
		// for, not when it runs; what depends on the base (its
		// environment) is checked again by Resolve.
		if _, err := ParseDockerfileWith(s.Dockerfile, DockerfileOptions{Args: s.BuildArgs, unknownBase: true}); err != nil {
			return err
		}
	} else if len(s.BuildArgs) > 0 {
		return fieldErr("build_args", "build args are for a Dockerfile's ARGs; this spec has no dockerfile")
	}
	if s.From != nil {
		if err := s.From.validate("from"); err != nil {
			return err
		}
	}
	if len(s.Steps) > MaxSteps {
		return fieldErr("steps", "%d steps, at most %d", len(s.Steps), MaxSteps)
	}
	for i, st := range s.Steps {
		if err := st.validate(fmt.Sprintf("steps[%d]", i)); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		field, cmd string
	}{{"start_cmd", s.StartCmd}, {"ready_cmd", s.ReadyCmd}} {
		if err := checkText(c.cmd, MaxCommandBytes); err != nil {
			return fieldErr(c.field, "%s", err)
		}
	}
	switch {
	case s.ReadyTimeoutSeconds < 0 || s.ReadyTimeoutSeconds > MaxReadyTimeoutSecs:
		return fieldErr("ready_timeout_seconds", "%d, want 0 to %d", s.ReadyTimeoutSeconds, MaxReadyTimeoutSecs)
	case s.ReadyTimeoutSeconds > 0 && s.ReadyCmd == "":
		return fieldErr("ready_timeout_seconds", "bounds the ready_cmd, which is not given")
	case s.VCPUs < 0:
		return fieldErr("vcpus", "negative")
	case s.MemoryMiB < 0:
		return fieldErr("memory_mib", "negative")
	}
	if n := s.Network; n != nil {
		if len(n.Allow) > 0 && !n.Internet {
			return fieldErr("network.allow", "an allow list needs internet: true (without it the build has no network at all)")
		}
		if len(n.Allow) > MaxAllow {
			return fieldErr("network.allow", "%d entries, at most %d", len(n.Allow), MaxAllow)
		}
		for i, a := range n.Allow {
			if a == "" || len(a) > 253 || strings.ContainsAny(a, " \t\r\n\x00/") {
				return fieldErr(fmt.Sprintf("network.allow[%d]", i), "%q is not a host name", a)
			}
		}
	}
	return nil
}

// Base is the spec's From, or the built-in template when it has none.
func (s *Spec) Base() From {
	if s.From == nil {
		return From{Template: template.DefaultBase}
	}
	return *s.From
}

func (f From) validate(field string) error {
	n := 0
	for _, v := range []string{f.Template, f.Image, f.Archive} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return fieldErr(field, "give exactly one of template, image, archive")
	}
	switch {
	case f.Template != "":
		if _, err := template.ParseRef(f.Template); err != nil {
			return fieldErr(field+".template", "%s", err)
		}
	case f.Image != "":
		if err := checkImageRef(f.Image); err != nil {
			return fieldErr(field+".image", "%s", err)
		}
	default:
		if _, err := contextPath(f.Archive); err != nil {
			return fieldErr(field+".archive", "%s", err)
		}
	}
	return nil
}

// imageRE is the grammar of an OCI image reference (the distribution
// project's): an optional registry host[:port]/, lower-case path
// components joined by '/', then an optional :tag and @digest.
var imageRE = regexp.MustCompile(`^` +
	`(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]{1,5})?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?` +
	`(?:@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,})?$`)

func checkImageRef(ref string) error {
	if ref == "scratch" {
		return fmt.Errorf("scratch is an empty file system, with no shell for the steps nor room for the sandbox's agent; start from a template or an image")
	}
	if len(ref) > 512 || !imageRE.MatchString(ref) {
		return fmt.Errorf("%q is not an image reference ([registry/]path[:tag][@digest], lower-case path)", ref)
	}
	return nil
}

// userRE is a Unix user name as useradd takes it.
var userRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

func checkUser(u string) error {
	if !userRE.MatchString(u) {
		return fmt.Errorf("bad user %q: a user name (a-z, 0-9, '_', '-', starting with a letter or '_', at most 32); numeric ids are not supported", u)
	}
	return nil
}

var modeRE = regexp.MustCompile(`^0?[0-7]{3,4}$`)

// checkText bounds a command or value and refuses NUL, which no command
// line or environment can carry.
func checkText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("holds a NUL byte")
	}
	return nil
}

// checkAbs accepts an absolute, clean path in the template ("/a/b", and
// "/a/b/" where a trailing slash means "into this directory").
func checkAbs(p string) error {
	if err := checkText(p, MaxPathBytes); err != nil {
		return err
	}
	trimmed := p
	if len(p) > 1 {
		trimmed = strings.TrimSuffix(p, "/")
	}
	if !path.IsAbs(p) || path.Clean(trimmed) != trimmed {
		return fmt.Errorf("%q is not an absolute, clean path (no '.', '..' or '//')", p)
	}
	return nil
}

// contextPath checks a path inside the build context: relative, clean, not
// leading out ("..") and returns it without a trailing slash ("." is the
// whole context).
func contextPath(p string) (string, error) {
	if err := checkText(p, MaxPathBytes); err != nil {
		return "", err
	}
	trimmed := strings.TrimSuffix(p, "/")
	if p == "" || trimmed == "" || path.IsAbs(p) || path.Clean(trimmed) != trimmed ||
		trimmed == ".." || strings.HasPrefix(trimmed, "../") || strings.Contains(p, "\\") {
		return "", fmt.Errorf("%q is not a clean path inside the build context (relative, no '..', no '//', no '\\')", p)
	}
	return trimmed, nil
}

// Defaults are the defaults of the template a resolved spec (no
// Dockerfile left, see Resolve) builds on a base whose defaults are base:
// its env, workdir and user steps apply over the base's in order (a later
// value of a name wins), then the spec's own start_cmd, ready_cmd,
// ready_timeout_seconds, vcpus and memory_mib where it gives them. What the
// spec does not set stays the base's, as an image's CMD stays in Docker.
func (s *Spec) Defaults(base template.Defaults) template.Defaults {
	d := base
	d.Env = maps.Clone(base.Env)
	for _, st := range s.Steps {
		switch st.Kind() {
		case KindEnv:
			if d.Env == nil {
				d.Env = map[string]string{}
			}
			maps.Copy(d.Env, st.Env)
		case KindWorkdir:
			d.Workdir = st.Workdir
		case KindUser:
			d.User = st.User
		}
	}
	if s.StartCmd != "" {
		d.StartCmd = s.StartCmd
	}
	if s.ReadyCmd != "" {
		d.ReadyCmd, d.ReadyTimeoutSeconds = s.ReadyCmd, s.ReadyTimeoutSeconds
	}
	if s.VCPUs != 0 {
		d.VCPUs = s.VCPUs
	}
	if s.MemoryMiB != 0 {
		d.MemoryMiB = s.MemoryMiB
	}
	return d
}
