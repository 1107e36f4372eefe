package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/client"
)

// templateVerbs are the verbs of "withruntime template".
func (a *App) templateVerbs() []leaf {
	return []leaf{
		a.templateBuildLeaf(),
		{use: "import -t NAME[:TAG] [--json] ARCHIVE", short: "make a template from an image archive (docker save, OCI archive; - reads stdin)",
			about: templateImportAbout, define: a.templateImport},
		{use: "ls [--json]", short: "list templates (the account's and the public ones)", aliases: []string{"list"},
			about: "Lists the templates of the key's account and the public ones, by name and tag.", define: a.templateList},
		{use: "get [--json] NAME[:TAG]", short: "show one template",
			about: "Shows one template: its source, layers, size and the defaults of its sandboxes. NAME alone is NAME:latest.", define: a.templateGet},
		{use: "rm [--json] NAME[:TAG]...", short: "remove templates", aliases: []string{"delete"},
			about: templateRemoveAbout, define: a.templateRemove},
		{use: "publish [--private] [--json] NAME[:TAG]", short: "show an admin template to every account (admin key)",
			about: templatePublishAbout, define: a.templatePublish},
	}
}

const templatePublishAbout = `Makes template NAME[:TAG] of the admin account public: every account sees it
in "template ls" and can start sandboxes from it by name (an account's own
template of the same name goes first). --private takes that back; sandboxes
already started from it keep it. Needs the admin key. Prints NAME:TAG and
whether it is now public.`

func (a *App) templatePublish(cmd *command, s streams) runFunc {
	private := cmd.fs.Bool("private", false, "take the template back from the other accounts")
	return a.oneTemplate(cmd, s, func(ctx context.Context, c *client.Client, name string) (*api.Template, error) {
		return c.PublishTemplate(ctx, name, !*private)
	}, func(w io.Writer, t *api.Template) {
		state := "public"
		if !t.Public {
			state = "private"
		}
		fmt.Fprintln(w, t.Name+":"+t.Tag+" "+state)
	})
}

// oneTemplate is a verb on one template NAME[:TAG]: call, then the
// template printed by show, or as JSON with --json.
func (a *App) oneTemplate(cmd *command, s streams, call func(context.Context, *client.Client, string) (*api.Template, error), show func(io.Writer, *api.Template)) runFunc {
	asJSON := cmd.fs.Bool("json", false, "print the template as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return cmd.usageError(s, "want one template NAME[:TAG], got %d arguments", len(pos))
		}
		c, done, err := a.connect(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		t, err := call(ctx, c, pos[0])
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		if *asJSON {
			return printJSON(s, t)
		}
		show(s.stdout, t)
		return exitOK
	}
}

const templateImportAbout = `Makes template NAME[:TAG] (tag latest when left out) from an image archive:
the tarball "docker save IMAGE -o app.tar" writes, or an OCI archive
("skopeo copy docker://IMAGE oci-archive:app.tar"). ARCHIVE is a file, or -
for standard input. An argument that is no file but an image reference
(registry/repository:tag) is read from its registry by the server, which
reaches only public addresses unless it runs with --allow-private-registries. The image's environment, working directory, user and
command become the defaults of the template's sandboxes. Prints the
template's NAME:TAG and id; on a terminal it shows the bytes sent as it goes.
A sandbox starts from it with "withruntime sandbox create --template NAME".`

const templateRemoveAbout = `Removes templates. The name is free at once; a template that sandboxes,
pools or paused sandboxes still use is kept for them (state deleting) and its
storage goes with the last of them. Prints each NAME:TAG removed.`

// templateFlag registers -t/--template, the NAME[:TAG] a command makes.
func templateFlag(c *command) *string {
	return c.fs.StringP("template", "t", "", "make template `NAME[:TAG]` (tag latest when left out; required)")
}

func (a *App) templateImport(cmd *command, s streams) runFunc {
	name := templateFlag(cmd)
	asJSON := cmd.fs.Bool("json", false, "print the template as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return cmd.usageError(s, "want one ARCHIVE (a file, or - for standard input) or image REF, got %d arguments", len(pos))
		}
		if *name == "" {
			return cmd.usageError(s, "-t NAME[:TAG] is required: the template to make")
		}
		if isImageRef(pos[0]) {
			c, done, err := a.connect(ctx)
			if err != nil {
				report(s.stderr, err)
				return exitFailure
			}
			defer done()
			t, err := c.ImportTemplateRef(ctx, *name, pos[0])
			if err != nil {
				report(s.stderr, err)
				return exitFailure
			}
			return printTemplateMade(s, t, *asJSON)
		}
		archive, size, closeArchive, err := openArchive(s, pos[0])
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer closeArchive()
		c, done, err := a.connect(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		body, stop := withProgress(s.stderr, archive, size)
		t, err := c.ImportTemplate(ctx, *name, body)
		stop()
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		return printTemplateMade(s, t, *asJSON)
	}
}

// isImageRef reports whether arg names an image in a registry rather than
// a file: it has a registry's or a tag's separator ("/" or ":"), it reads
// as no path (no leading "/", "." or "~", no archive's extension), and no
// file of that name exists.
func isImageRef(arg string) bool {
	if arg == "-" || !strings.ContainsAny(arg, "/:") || strings.ContainsAny(arg[:1], "/.~") {
		return false
	}
	for _, ext := range []string{".tar", ".tgz", ".tar.gz", ".oci"} {
		if strings.HasSuffix(arg, ext) {
			return false
		}
	}
	_, err := os.Stat(arg)
	return errors.Is(err, fs.ErrNotExist)
}

// openArchive opens the archive a command sends: a file, or standard input
// for "-". size is the file's size, or -1 when it is not known.
func openArchive(s streams, arg string) (r io.Reader, size int64, closeFn func(), err error) {
	if arg == "-" {
		if s.stdin == nil {
			return strings.NewReader(""), 0, func() {}, nil
		}
		if f, ok := s.stdin.(*os.File); ok && isTerminal(f) {
			return nil, 0, nil, &cliError{client.CodeInvalidRequest, "standard input is a terminal: pipe the archive in, as in: docker save IMAGE | withruntime template import -t NAME -"}
		}
		return s.stdin, -1, func() {}, nil
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, 0, nil, &cliError{client.CodeInvalidRequest, err.Error()}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, nil, &cliError{client.CodeInvalidRequest, err.Error()}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, nil, &cliError{client.CodeInvalidRequest, arg + " is not a regular file (an image archive, or - for standard input)"}
	}
	return f, fi.Size(), func() { f.Close() }, nil
}

// withProgress returns r counting what is read from it and, when w is a
// terminal, a line on w that shows the bytes sent so far (of size, when
// known), rewritten a few times a second. stop ends the line.
func withProgress(w io.Writer, r io.Reader, size int64) (io.Reader, func()) {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return r, func() {}
	}
	p := &progressReader{r: r}
	tick := time.NewTicker(250 * time.Millisecond)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	line := func() {
		n := p.sent()
		if size >= 0 {
			fmt.Fprintf(f, "\rsent %s of %s", formatBytes(n), formatBytes(size))
		} else {
			fmt.Fprintf(f, "\rsent %s", formatBytes(n))
		}
	}
	go func() {
		defer wg.Done()
		for {
			select {
			case <-tick.C:
				line()
			case <-quit:
				return
			}
		}
	}()
	return p, func() {
		tick.Stop()
		close(quit)
		wg.Wait()
		line()
		fmt.Fprintln(f)
	}
}

// progressReader counts the bytes read through it.
type progressReader struct {
	r  io.Reader
	mu sync.Mutex // guards n
	n  int64
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.mu.Lock()
	p.n += int64(n)
	p.mu.Unlock()
	return n, err
}

func (p *progressReader) sent() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// printTemplateMade prints a template just made: NAME:TAG and its id, or
// the API's object with --json.
func printTemplateMade(s streams, t *api.Template, asJSON bool) int {
	if asJSON {
		return printJSON(s, t)
	}
	fmt.Fprintf(s.stdout, "%s\t%s\n", t.Name+":"+t.Tag, t.ID)
	return exitOK
}

func (a *App) templateList(cmd *command, s streams) runFunc {
	return runListing(a, s, listing[api.Template]{
		cmd: cmd,
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]api.Template, error) {
			return c.ListTemplates(ctx)
		},
		asJSON: func(l []api.Template) any { return api.TemplateList{Templates: l} },
		header: "NAME\tTAG\tSOURCE\tSIZE\tLAYERS\tCREATED",
		row: func(t api.Template) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s", t.Name, t.Tag, dash(t.Source), formatBytes(t.SizeBytes), t.Layers, timeString(&t.CreatedAt))
		},
	})
}

func (a *App) templateGet(cmd *command, s streams) runFunc {
	return a.oneTemplate(cmd, s, func(ctx context.Context, c *client.Client, name string) (*api.Template, error) {
		return c.GetTemplate(ctx, name)
	}, printTemplate)
}

func (a *App) templateRemove(cmd *command, s streams) runFunc {
	asJSON := cmd.fs.Bool("json", false, "print the removed templates as JSON")
	return func(ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return cmd.usageError(s, "want at least one template NAME[:TAG]")
		}
		c, done, err := a.connect(ctx)
		if err != nil {
			report(s.stderr, err)
			return exitFailure
		}
		defer done()
		status := exitOK
		removed := []api.Template{}
		for _, name := range pos {
			t, err := c.DeleteTemplate(ctx, name)
			if err != nil {
				report(s.stderr, err)
				status = exitFailure
				continue
			}
			removed = append(removed, *t)
			if !*asJSON {
				fmt.Fprintln(s.stdout, t.Name+":"+t.Tag)
			}
		}
		if *asJSON {
			if code := printJSON(s, api.TemplateList{Templates: removed}); code != exitOK {
				return code
			}
		}
		return status
	}
}

func printTemplate(w io.Writer, t *api.Template) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Name", t.Name+":"+t.Tag)
	row("ID", t.ID)
	row("State", dash(t.State))
	row("Source", dash(t.Source))
	base := t.Base
	if base == "" {
		base = "- (the image's own file system)"
	}
	row("Base", base)
	row("Layers", strconv.Itoa(t.Layers))
	row("Size", formatBytes(t.SizeBytes))
	if t.Public {
		row("Public", "yes")
	}
	row("Created", timeString(&t.CreatedAt))
	d := t.Defaults
	if d.User != "" {
		row("User", d.User)
	}
	if d.Workdir != "" {
		row("Workdir", d.Workdir)
	}
	if d.VCPUs > 0 {
		row("vCPUs", strconv.Itoa(d.VCPUs))
	}
	if d.MemoryMiB > 0 {
		row("Memory", fmt.Sprintf("%d MiB", d.MemoryMiB))
	}
	if d.StartCmd != "" {
		row("Start command", d.StartCmd)
	}
	if d.ReadyCmd != "" {
		ready := d.ReadyCmd
		if d.ReadyTimeoutSeconds > 0 {
			ready += fmt.Sprintf(" (at most %ds)", d.ReadyTimeoutSeconds)
		}
		row("Ready command", ready)
	}
	keys := make([]string, 0, len(d.Env))
	for k := range d.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		row("Env", k+"="+d.Env[k])
	}
	tw.Flush()
}

// formatBytes prints a size in bytes with a binary unit (KiB, MiB, GiB),
// as du -h does.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	f, i := float64(n)/unit, 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}
