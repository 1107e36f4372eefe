package build

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/withruntime/withruntime/internal/envname"
	"github.com/withruntime/withruntime/internal/template"
)

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
		// An image's USER (a registry's or an archive's) is the user its
		// build steps run as in Docker;
		// a template's default user is its sandboxes', not a build's.
		if (from.Image != "" || from.Archive != "") && d.User != "" {
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
