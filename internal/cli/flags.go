package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// durationValue is a flag given as whole seconds ("900") or as a Go
// duration ("15m", "1h30m"). It must be positive.
type durationValue struct {
	d   time.Duration
	raw string // as typed, for messages
}

func (v *durationValue) String() string {
	if v == nil || v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v *durationValue) Type() string { return "duration" }

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	v.d, v.raw = d, s
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			return 0, errors.New("must be positive")
		}
		if n > int64(time.Duration(1<<63-1)/time.Second) {
			return 0, errors.New("too large")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want seconds or a duration such as 15m")
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

// seconds returns the duration in whole seconds, rounded up; 0 when unset.
func (v *durationValue) seconds() int {
	return int((v.d + time.Second - 1) / time.Second)
}

// millis returns the duration in whole milliseconds, rounded up; 0 when
// unset.
func (v *durationValue) millis() int64 {
	return int64((v.d + time.Millisecond - 1) / time.Millisecond)
}

// mapValue is a repeatable KEY=VALUE flag.
type mapValue map[string]string

func (m mapValue) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func (m mapValue) Type() string { return "KEY=VALUE" }

func (m mapValue) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want KEY=VALUE")
	}
	m[k] = v
	return nil
}

// listValue is a repeatable flag.
type listValue []string

func (l *listValue) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *listValue) Type() string { return "list" }

func (l *listValue) Set(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	*l = append(*l, s)
	return nil
}

// command is what a verb's definition gets: the flag set it registers
// its flags on (the cobra command's) and what prints its usage errors.
type command struct {
	cobra *cobra.Command
	fs    *pflag.FlagSet
}

// name is the command's path without the program: "sandbox run".
func (c *command) name() string {
	return strings.TrimPrefix(c.cobra.CommandPath(), c.cobra.Root().Name()+" ")
}

// parse parses the flags in args up to the first argument that is not a
// flag, or up to "--", for the commands whose arguments after that are a
// command line (run, exec: cobra does not parse their flags). When it
// returns ok false, the command exits with code: 0 for --help (the help on
// stdout), 2 for a usage error.
func (c *command) parse(s streams, args []string) (ok bool, code int) {
	c.fs.SetInterspersed(false)
	err := c.fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		err = nil
		_ = c.fs.Set("help", "true")
	}
	if err != nil {
		return false, flagError(s, c.cobra, err)
	}
	if help, _ := c.fs.GetBool("help"); help {
		c.cobra.HelpFunc()(c.cobra, args)
		return false, exitOK
	}
	return true, 0
}

// usageError prints a usage error and returns its exit code.
func (c *command) usageError(s streams, format string, args ...any) int {
	fmt.Fprintf(s.stderr, "%s: %s\n", c.name(), fmt.Sprintf(format, args...))
	printUsageLine(s.stderr, c.cobra)
	return exitUsage
}

// flagError prints an error of the flags of cmd as a usage error.
func flagError(s streams, cmd *cobra.Command, err error) int {
	(&command{cobra: cmd}).usageError(s, "%v", err)
	return exitUsage
}

// printUsageLine prints the short usage that follows a usage error.
func printUsageLine(w io.Writer, cmd *cobra.Command) {
	if !cmd.HasParent() {
		fmt.Fprint(w, usageLine)
		return
	}
	fmt.Fprintf(w, "usage: %s\n(\"%s --help\" lists the flags)\n", useLine(cmd), cmd.CommandPath())
}

// useLine is the command's path and what follows its name in Use.
func useLine(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Use
	}
	return cmd.Parent().CommandPath() + " " + cmd.Use
}

// printFlags prints the flags of fs with their help, the form of a
// placeholder in `backquotes` of the help naming the value.
func printFlags(w io.Writer, fs *pflag.FlagSet) {
	first := true
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		if first {
			fmt.Fprintln(w, "\nflags:")
			first = false
		}
		name, help := pflag.UnquoteUsage(f)
		if placeholder, ok := typePlaceholders[name]; ok {
			name = placeholder
		}
		if def := f.DefValue; !zeroDefault(def) {
			help += fmt.Sprintf(" (default %s)", def)
		}
		line := "  --" + f.Name
		if f.Shorthand != "" {
			line = "  -" + f.Shorthand + ", --" + f.Name
		}
		if name != "" {
			line += " " + name
		}
		if len(line) > 24 {
			fmt.Fprintf(w, "%s\n%26s%s\n", line, "", help)
			return
		}
		fmt.Fprintf(w, "%-26s%s\n", line, help)
	})
}

// typePlaceholders name the value of a flag whose help has no `NAME`,
// instead of its Go type.
var typePlaceholders = map[string]string{
	"func": "VALUE", "string": "VALUE", "int": "N", "float": "X", "duration": "DURATION",
}

func zeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "[]", "0s":
		return true
	}
	return false
}
