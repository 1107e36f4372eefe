package build

import (
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/withruntime/withruntime/internal/template"
)

// DockerfileOptions are what a Dockerfile is parsed with.
type DockerfileOptions struct {
	// Args are the --build-arg values; each must be declared by an ARG.
	Args map[string]string
	// Base, when set, returns the defaults of the base that FROM names:
	// Docker expands $NAME in ENV, WORKDIR, COPY and USER against the
	// base image's environment too (ENV PATH=/opt/bin:$PATH), resolves a
	// relative WORKDIR against the base's, and runs RUN as an image's USER.
	// Without it the base's environment is empty, its workdir "/". An
	// error of Base is returned wrapped (errors.Is/As find it), not as an
	// *Error: a missing base is the caller's to classify.
	Base func(From) (template.Defaults, error)

	// unknownBase: Base is not known yet (a spec checked when it is
	// received); a name not set by the Dockerfile stands for a value that
	// passes every check, so only mistakes of the text itself are found.
	unknownBase bool
}

// ParseDockerfile parses a Dockerfile into a build's base (From), its
// steps and its start command (StartCmd, from CMD and ENTRYPOINT); the
// rest of the Spec is left empty. See ParseDockerfileWith.
func ParseDockerfile(text string, args map[string]string) (*Spec, error) {
	return ParseDockerfileWith(text, DockerfileOptions{Args: args})
}

// ParseDockerfileWith parses a Dockerfile of the supported subset:
//
//   - FROM default (the built-in image), FROM template://NAME[:TAG], FROM
//     archive://PATH (an image archive in the build context) or FROM an OCI
//     image reference; AS NAME is accepted; scratch, --platform and a
//     second FROM (multi-stage) are refused.
//   - RUN, shell form or JSON exec form (each argument quoted into one shell
//     command); it runs as root until a USER, as in Docker, and sees the
//     ARGs declared before it in its environment.
//   - COPY and ADD of files of the build context, with --chown=USER[:USER]
//     and --chmod=MODE; owned by root without --chown, as in Docker. ADD of
//     a URL or git repository, and ADD of a local tar archive (which
//     Docker would unpack) are refused, as are wildcards and COPY --from.
//   - ENV (ENV K V and ENV K=V K2="v 2"), ARG (with defaults, before or
//     after FROM), WORKDIR, USER (a user name), CMD and ENTRYPOINT.
//   - Parser directives: escape (\ or `) and syntax (accepted; this parser
//     is the frontend). Line continuations and comments as in Docker.
//
// Every other instruction (LABEL, EXPOSE, HEALTHCHECK, VOLUME, SHELL,
// STOPSIGNAL, ONBUILD, MAINTAINER, unknown ones) and heredocs are refused
// with an *Error naming the line: nothing is silently ignored.
func ParseDockerfileWith(text string, opts DockerfileOptions) (*Spec, error) {
	if len(text) > MaxDockerfileBytes {
		return nil, fieldErr("dockerfile", "larger than %d bytes", MaxDockerfileBytes)
	}
	p := &dfParser{
		opts:     opts,
		escape:   '\\',
		meta:     map[string]string{},
		declared: map[string]bool{},
		args:     map[string]string{},
		env:      map[string]string{},
	}
	if err := p.parse(text); err != nil {
		return nil, err
	}
	for k := range opts.Args {
		if !p.declared[k] {
			return nil, fieldErr("build_args", "build arg %q is not declared by an ARG in the Dockerfile", k)
		}
	}
	start, err := p.startCmd()
	if err != nil {
		return nil, err
	}
	return &Spec{From: p.from, Steps: p.steps, StartCmd: start}, nil
}

type dfParser struct {
	opts   DockerfileOptions
	escape rune
	x      expander

	from     *From
	fromLine int
	// meta are the ARGs before FROM (only FROM sees them); declared every
	// ARG name; args the ARGs of the stage with a value, argOrder their
	// order; env the base's environment and every ENV since.
	meta     map[string]string
	declared map[string]bool
	args     map[string]string
	argOrder []string
	env      map[string]string
	user     string
	workdir  string
	// imageUser: user is still the base image's own USER.
	imageUser bool

	steps      []Step
	cmd, entry *cmdForm
}

// cmdForm is a CMD or ENTRYPOINT: JSON exec form (argv) or shell form.
type cmdForm struct {
	line  int
	exec  bool
	argv  []string
	shell string
}

var directiveRE = regexp.MustCompile(`^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.*?)\s*$`)

func (p *dfParser) parse(text string) error {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	i := 0
	// Parser directives come first; the first line that is not one ends
	// them, and an unknown one is a comment, as in Docker.
	seen := map[string]bool{}
directives:
	for ; i < len(lines); i++ {
		m := directiveRE.FindStringSubmatch(lines[i])
		if m == nil {
			break
		}
		name := strings.ToLower(m[1])
		switch name {
		case "escape", "syntax", "check":
		default:
			break directives
		}
		if seen[name] {
			return lineErr(i+1, "the %s directive is given twice", name)
		}
		seen[name] = true
		if name == "escape" {
			if m[2] != `\` && m[2] != "`" {
				return lineErr(i+1, "escape must be \\ or `, not %q", m[2])
			}
			p.escape = rune(m[2][0])
		}
	}
	p.x = expander{escape: p.escape, lookup: p.lookup}
	for i < len(lines) {
		start := i + 1
		l := lines[i]
		i++
		if t := strings.TrimSpace(l); t == "" || t[0] == '#' {
			continue
		}
		// A line ending in the escape character goes on with the next
		// one; comment and empty lines inside are dropped, as in Docker.
		var b strings.Builder
		for {
			t := strings.TrimRightFunc(l, isSpace)
			if !strings.HasSuffix(t, string(p.escape)) {
				b.WriteString(l)
				break
			}
			b.WriteString(strings.TrimSuffix(t, string(p.escape)))
			for i < len(lines) {
				if t := strings.TrimSpace(lines[i]); t == "" || t[0] == '#' {
					i++
					continue
				}
				break
			}
			if i >= len(lines) {
				break
			}
			l = lines[i]
			i++
		}
		l = b.String()
		instr, rest := cutSpace(strings.TrimSpace(l))
		if err := p.instruction(start, strings.ToUpper(instr), strings.TrimSpace(rest)); err != nil {
			return err
		}
	}
	if p.from == nil {
		return lineErr(len(lines), "no FROM: a Dockerfile names its base with FROM")
	}
	return nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\r' }

// cutSpace splits s at its first space or tab.
func cutSpace(s string) (string, string) {
	if i := strings.IndexFunc(s, isSpace); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// refused are the instructions of Docker's that a template build does not
// take, with why.
var refused = map[string]string{
	"LABEL":       "labels are metadata a template does not record (it keeps a name, a tag and defaults); remove it",
	"EXPOSE":      "a template does not record ports (a sandbox's ports need no declaring); remove it",
	"MAINTAINER":  "it is metadata a template does not record (and deprecated in Docker); remove it",
	"HEALTHCHECK": "a template's readiness is its ready command: give ready_cmd with the build instead",
	"VOLUME":      "a sandbox has no volumes; remove it",
	"SHELL":       "RUN always uses /bin/sh -c; write the shell into the command (RUN [\"bash\", \"-c\", \"...\"])",
	"STOPSIGNAL":  "a sandbox's processes are stopped by the platform; remove it",
	"ONBUILD":     "triggers for later builds are not supported",
}

// heredocRE finds a heredoc (<<EOF, <<-"EOF") in RUN, COPY or ADD.
var heredocRE = regexp.MustCompile(`<<-?\s*["']?[A-Za-z_]`)

func (p *dfParser) instruction(line int, instr, rest string) error {
	if why, ok := refused[instr]; ok {
		return lineErr(line, "%s is not supported: %s", instr, why)
	}
	if p.from == nil && instr != "FROM" && instr != "ARG" {
		if !slices.Contains([]string{"RUN", "COPY", "ADD", "ENV", "WORKDIR", "USER", "CMD", "ENTRYPOINT"}, instr) {
			return lineErr(line, "unknown instruction %s", instr)
		}
		return lineErr(line, "%s before FROM: a Dockerfile starts with FROM (only ARG may come before it)", instr)
	}
	if rest == "" {
		return lineErr(line, "%s needs arguments", instr)
	}
	switch instr {
	case "RUN", "COPY", "ADD":
		if heredocRE.MatchString(rest) {
			return lineErr(line, "%s with a heredoc (<<) is not supported; write the command or the file out", instr)
		}
	}
	var err error
	switch instr {
	case "FROM":
		err = p.fromInstr(line, rest)
	case "ARG":
		err = p.argInstr(rest)
	case "ENV":
		err = p.envInstr(line, rest)
	case "RUN":
		err = p.runInstr(line, rest)
	case "COPY", "ADD":
		err = p.copyInstr(line, instr, rest)
	case "WORKDIR":
		err = p.workdirInstr(line, rest)
	case "USER":
		err = p.userInstr(line, rest)
	case "CMD", "ENTRYPOINT":
		f := &cmdForm{line: line, shell: rest}
		if argv, ok := execForm(rest); ok {
			f.exec, f.argv, f.shell = true, argv, ""
		}
		if instr == "CMD" {
			p.cmd = f
		} else {
			p.entry = f
		}
	default:
		return lineErr(line, "unknown instruction %s", instr)
	}
	if err != nil {
		var e *Error
		if b, ok := err.(baseError); ok {
			return b.error
		}
		if errors.As(err, &e) && e.Line > 0 {
			return err
		}
		return lineErr(line, "%s: %v", instr, err)
	}
	return nil
}

// baseError carries an error of DockerfileOptions.Base out as it is.
type baseError struct{ error }

// lookup is what $NAME means: before FROM, the ARGs before it; after, the
// environment (base and ENV) first, then the stage's ARGs, as in Docker.
func (p *dfParser) lookup(name string) (string, bool) {
	if p.from == nil {
		v, ok := p.meta[name]
		return v, ok
	}
	if v, ok := p.env[name]; ok {
		return v, true
	}
	if v, ok := p.args[name]; ok {
		return v, true
	}
	if p.opts.unknownBase {
		// The base's environment is not known yet: any name may be in
		// it, with any value; a value that passes every check stands in.
		return "x", true
	}
	return "", false
}

// Outline is Resolve with the base not known yet (a build whose base is
// an image knows its defaults only once the image is read, and resolves
// then): the names the base's environment may set stand for placeholder
// values, so its steps are never to be run; it tells the base (From) and
// the number of steps before the base is read. A spec without a
// Dockerfile is returned as is.
func (s *Spec) Outline() (*Spec, error) {
	return s.parsed(DockerfileOptions{Args: s.BuildArgs, unknownBase: true})
}

// parsed is the spec with its Dockerfile parsed with opts into From,
// Steps and, unless the spec gives one, StartCmd; a spec without a
// Dockerfile is returned as is.
func (s *Spec) parsed(opts DockerfileOptions) (*Spec, error) {
	if s.Dockerfile == "" {
		return s, nil
	}
	d, err := ParseDockerfileWith(s.Dockerfile, opts)
	if err != nil {
		return nil, err
	}
	out := *s
	out.Dockerfile, out.BuildArgs = "", nil
	out.From, out.Steps = d.From, d.Steps
	if out.StartCmd == "" {
		out.StartCmd = d.StartCmd
	}
	return &out, nil
}

// Resolve returns the spec with its Dockerfile parsed into From, Steps
// and, unless the spec gives one, StartCmd; a spec without a Dockerfile is
// returned as is. base is DockerfileOptions.Base (nil: an empty base).
func (s *Spec) Resolve(base func(From) (template.Defaults, error)) (*Spec, error) {
	out, err := s.parsed(DockerfileOptions{Args: s.BuildArgs, Base: base})
	if err != nil || out == s {
		return out, err
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}
