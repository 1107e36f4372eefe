package build

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/withruntime/withruntime/internal/envname"
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

// execForm reads the JSON exec form (["a", "b"]); anything else is the
// shell form, as in Docker.
func execForm(s string) ([]string, bool) {
	if !strings.HasPrefix(s, "[") {
		return nil, false
	}
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil {
		return nil, false
	}
	return argv, true
}

// flags splits leading --name=value words off rest (unexpanded).
func flags(rest string) (map[string]string, []string, string) {
	f := map[string]string{}
	var order []string
	for strings.HasPrefix(rest, "--") {
		word, tail := cutSpace(rest)
		name, value, _ := strings.Cut(strings.TrimPrefix(word, "--"), "=")
		f[name] = value
		order = append(order, name)
		rest = strings.TrimSpace(tail)
	}
	return f, order, rest
}

func (p *dfParser) fromInstr(line int, rest string) error {
	if p.from != nil {
		return lineErr(line, "FROM: multi-stage builds are not supported (a second FROM; the first is on line %d)", p.fromLine)
	}
	if _, order, _ := flags(rest); len(order) > 0 {
		return fmt.Errorf("--%s is not supported", order[0])
	}
	w, err := p.x.words(rest)
	if err != nil {
		return err
	}
	switch {
	case len(w) == 3 && strings.EqualFold(w[1], "AS"):
		// A stage's name names it for COPY --from, which is refused; a
		// single stage may still carry one.
	case len(w) != 1:
		return fmt.Errorf("want FROM REF [AS NAME], got %d words", len(w))
	}
	from, err := parseFrom(w[0])
	if err != nil {
		return err
	}
	p.from, p.fromLine = &from, line
	p.user, p.workdir = UserRoot, "/"
	if p.opts.Base != nil {
		d, err := p.opts.Base(from)
		if err != nil {
			// The caller's error keeps its kind (a template not found is
			// not_found, not this Dockerfile's mistake).
			return baseError{fmt.Errorf("Dockerfile line %d: FROM: %w", line, err)}
		}
		maps.Copy(p.env, d.Env)
		if d.Workdir != "" {
			p.workdir = d.Workdir
		}
		// An image's USER is the user its build steps run as in Docker;
		// a template's default user is its sandboxes', not a build's.
		if from.Image != "" && d.User != "" {
			p.user, p.imageUser = d.User, true
		}
	}
	return nil
}

// parseFrom reads FROM's reference: "default", "template://NAME[:TAG]",
// "archive://PATH" or an OCI image reference. The two schemes are never a
// valid image reference, so no name means two things.
func parseFrom(ref string) (From, error) {
	if ref == template.DefaultBase {
		return From{Template: ref}, nil
	}
	if name, ok := strings.CutPrefix(ref, "template://"); ok {
		if _, err := template.ParseRef(name); err != nil {
			return From{}, err
		}
		return From{Template: name}, nil
	}
	if p, ok := strings.CutPrefix(ref, "archive://"); ok {
		clean, err := contextPath(p)
		if err != nil {
			return From{}, err
		}
		return From{Archive: clean}, nil
	}
	if err := checkImageRef(ref); err != nil {
		return From{}, err
	}
	return From{Image: ref}, nil
}

func (p *dfParser) argInstr(rest string) error {
	words, err := p.x.words(rest)
	if err != nil {
		return err
	}
	for _, w := range words {
		name, def, hasDef := strings.Cut(w, "=")
		if !envname.Valid(name) {
			return fmt.Errorf("bad name %q: letters, digits and '_', not starting with a digit", name)
		}
		p.declared[name] = true
		v, given := p.opts.Args[name]
		if !given {
			v, given = def, hasDef
		}
		if p.from == nil {
			if given {
				p.meta[name] = v
			}
			continue
		}
		if !given {
			// A stage's ARG without a value takes the one before FROM.
			v, given = p.meta[name]
		}
		if given {
			if _, ok := p.args[name]; !ok {
				p.argOrder = append(p.argOrder, name)
			}
			p.args[name] = v
		}
	}
	return nil
}

func (p *dfParser) envInstr(line int, rest string) error {
	env := map[string]string{}
	first, tail := cutSpace(rest)
	if !strings.Contains(first, "=") {
		// The old form: ENV NAME the value, the rest of the line.
		v, err := p.x.word(strings.TrimSpace(tail))
		if err != nil {
			return err
		}
		if strings.TrimSpace(tail) == "" {
			return fmt.Errorf("%s has no value (ENV NAME VALUE or ENV NAME=VALUE ...)", first)
		}
		env[first] = v
	} else {
		// Every word is expanded before any is set: ENV A=1 B=$A gives B
		// the A of before, as in Docker.
		words, err := p.x.words(rest)
		if err != nil {
			return err
		}
		for _, w := range words {
			name, v, ok := strings.Cut(w, "=")
			if !ok {
				return fmt.Errorf("%q is not NAME=VALUE", w)
			}
			env[name] = v
		}
	}
	if err := p.emit(line, "ENV", Step{Env: env}); err != nil {
		return err
	}
	maps.Copy(p.env, env)
	return nil
}

func (p *dfParser) runInstr(line int, rest string) error {
	if _, order, _ := flags(rest); len(order) > 0 {
		return fmt.Errorf("--%s is not supported", order[0])
	}
	cmd := rest
	if argv, ok := execForm(rest); ok {
		if len(argv) == 0 {
			return fmt.Errorf("an empty exec form")
		}
		cmd = QuoteArgv(argv)
	}
	// The ARGs of the stage are in a RUN's environment in Docker, not
	// kept in the template's: they are exported before the command.
	if len(p.argOrder) > 0 {
		var b strings.Builder
		b.WriteString("export")
		for _, n := range p.argOrder {
			b.WriteString(" " + n + "=" + Quote(p.args[n]))
		}
		cmd = b.String() + "\n" + cmd
	}
	if p.imageUser && checkUser(p.user) != nil {
		return fmt.Errorf("it would run as the image's own USER %q, which is not a user name a build step can run as; put USER NAME (or USER root) before it", p.user)
	}
	return p.emit(line, "RUN", Step{Run: cmd, User: p.user})
}

var archiveSuffixes = []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tbz", ".tar.xz", ".txz", ".tar.zst", ".tzst", ".tar.lz", ".tar.lzma"}

func (p *dfParser) copyInstr(line int, instr, rest string) error {
	f, order, rest := flags(rest)
	var owner, mode string
	for _, name := range order {
		switch name {
		case "chown":
			u, err := p.x.word(f[name])
			if err != nil {
				return err
			}
			if owner, err = userOnly(u); err != nil {
				return fmt.Errorf("--chown: %w", err)
			}
		case "chmod":
			mode = f[name]
		case "from":
			return fmt.Errorf("--from is multi-stage, which is not supported")
		default:
			return fmt.Errorf("--%s is not supported (only --chown and --chmod)", name)
		}
	}
	args, ok := execForm(rest)
	if !ok {
		var err error
		if args, err = p.x.words(rest); err != nil {
			return err
		}
	}
	if len(args) < 2 {
		return fmt.Errorf("want %s SRC... DEST", instr)
	}
	srcs, dest := args[:len(args)-1], args[len(args)-1]
	if len(srcs) > 1 && !strings.HasSuffix(dest, "/") {
		return fmt.Errorf("with more than one source the destination %q must end in /", dest)
	}
	// Docker takes ./app and a/../b as paths in the context, and a dest
	// relative to WORKDIR; the steps hold them clean. A src that leads
	// out stays as written, for the check to refuse.
	trail := strings.HasSuffix(dest, "/") || dest == "." || strings.HasSuffix(dest, "/.")
	if !path.IsAbs(dest) {
		dest = path.Join(p.workdir, dest)
	}
	if dest = path.Clean(dest); trail && dest != "/" {
		dest += "/"
	}
	if owner == "" {
		owner = UserRoot
	}
	for _, src := range srcs {
		if instr == "ADD" {
			if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") {
				return fmt.Errorf("%q: ADD of a URL or git repository is not supported; download it with RUN (and network) instead", src)
			}
			for _, s := range archiveSuffixes {
				if strings.HasSuffix(strings.ToLower(src), s) {
					return fmt.Errorf("%q: ADD of a tar archive (which Docker unpacks) is not supported; COPY it and unpack it with RUN tar", src)
				}
			}
		}
		if c := path.Clean(src); src != "" && !path.IsAbs(src) && c != ".." && !strings.HasPrefix(c, "../") {
			src = c
		}
		if strings.ContainsAny(src, "*?[") {
			return fmt.Errorf("%q: wildcards are not supported; name the files or their directory", src)
		}
		if err := p.emit(line, instr, Step{Copy: &Copy{Src: src, Dest: dest, User: owner, Mode: mode}}); err != nil {
			return err
		}
	}
	return nil
}

// userOnly reads USER and --chown's "name" or "name:group", where the
// group may only be the user's own (the one a name gets by default).
func userOnly(s string) (string, error) {
	u, g, hasGroup := strings.Cut(s, ":")
	if hasGroup && g != u {
		return "", fmt.Errorf("group %q: a group other than the user's own is not supported", g)
	}
	return u, checkUser(u)
}

func (p *dfParser) workdirInstr(line int, rest string) error {
	w, err := p.x.word(rest)
	if err != nil {
		return err
	}
	if w == "" {
		return fmt.Errorf("empty")
	}
	if !path.IsAbs(w) {
		w = path.Join(p.workdir, w)
	}
	w = path.Clean(w)
	if err := p.emit(line, "WORKDIR", Step{Workdir: w}); err != nil {
		return err
	}
	p.workdir = w
	return nil
}

func (p *dfParser) userInstr(line int, rest string) error {
	w, err := p.x.word(rest)
	if err != nil {
		return err
	}
	u, err := userOnly(w)
	if err != nil {
		return err
	}
	if err := p.emit(line, "USER", Step{User: u}); err != nil {
		return err
	}
	p.user, p.imageUser = u, false
	return nil
}

// emit checks a step made from an instruction and adds it, a mistake
// named by the line.
func (p *dfParser) emit(line int, instr string, st Step) error {
	st.Line = line
	if len(p.steps) == MaxSteps {
		return lineErr(line, "more than %d steps", MaxSteps)
	}
	if err := st.validate(""); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return lineErr(line, "%s: %s", instr, e.Msg)
		}
		return err
	}
	p.steps = append(p.steps, st)
	return nil
}

// startCmd is the start command CMD and ENTRYPOINT make, as Docker
// combines them: an exec-form ENTRYPOINT takes CMD's words (a shell-form
// CMD as /bin/sh -c CMD) as arguments. A shell-form ENTRYPOINT ignores CMD
// in Docker; here that pair is refused instead of dropping CMD unseen.
func (p *dfParser) startCmd() (string, error) {
	c, e := p.cmd, p.entry
	switch {
	case e == nil && c == nil:
		return "", nil
	case e == nil:
		if c.exec {
			return QuoteArgv(c.argv), nil
		}
		return c.shell, nil
	case !e.exec:
		if c != nil {
			return "", lineErr(c.line, "CMD has no effect after the shell-form ENTRYPOINT of line %d (Docker ignores it); remove it, or write ENTRYPOINT in JSON form", e.line)
		}
		return e.shell, nil
	}
	argv := slices.Clone(e.argv)
	if c != nil {
		if c.exec {
			argv = append(argv, c.argv...)
		} else {
			argv = append(argv, "/bin/sh", "-c", c.shell)
		}
	}
	return QuoteArgv(argv), nil
}

// Resolve returns the spec with its Dockerfile parsed into From, Steps
// and, unless the spec gives one, StartCmd; a spec without a Dockerfile is
// returned as is. base is DockerfileOptions.Base (nil: an empty base).
func (s *Spec) Resolve(base func(From) (template.Defaults, error)) (*Spec, error) {
	if s.Dockerfile == "" {
		return s, nil
	}
	d, err := ParseDockerfileWith(s.Dockerfile, DockerfileOptions{Args: s.BuildArgs, Base: base})
	if err != nil {
		return nil, err
	}
	out := *s
	out.Dockerfile, out.BuildArgs = "", nil
	out.From, out.Steps = d.From, d.Steps
	if out.StartCmd == "" {
		out.StartCmd = d.StartCmd
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return &out, nil
}
