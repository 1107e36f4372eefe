package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// durationValue is a flag given as whole seconds ("900") or as a Go
// duration ("15m", "1h30m"). It must be positive.
type durationValue struct {
	d time.Duration
}

func (v *durationValue) String() string {
	if v == nil || v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	v.d = d
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

func (l *listValue) Set(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	*l = append(*l, s)
	return nil
}

// command is one subcommand's flag set and usage.
type command struct {
	fs    *flag.FlagSet
	usage string // "withruntime sandbox run [flags] -- CMD [ARG...]"
	about string // what it does, a few lines
}

func newCommand(name, usage, about string, s streams) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	fs.Usage = func() {} // printed by parse, on the right stream
	return &command{fs: fs, usage: usage, about: about}
}

// parse parses the flags in args up to the first argument that is not a
// flag, or up to "--". When it returns ok false, the command exits with
// code: 0 for --help (usage on stdout), 2 for a usage error (the flag
// package's message and the usage line on stderr).
func (c *command) parse(s streams, args []string) (ok bool, code int) {
	err := c.fs.Parse(args)
	if err == nil {
		return true, 0
	}
	if errors.Is(err, flag.ErrHelp) {
		c.printUsage(s.stdout)
		return false, exitOK
	}
	c.printUsageLine(s.stderr)
	return false, exitUsage
}

// parseInterspersed parses flags placed anywhere among the positional
// arguments, which it returns; everything after "--" is positional.
func (c *command) parseInterspersed(s streams, args []string) (pos []string, ok bool, code int) {
	for {
		if ok, code := c.parse(s, args); !ok {
			return nil, false, code
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return pos, true, 0
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), true, 0
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageError prints a usage error and returns its exit code.
func (c *command) usageError(s streams, format string, args ...any) int {
	fmt.Fprintf(s.stderr, "%s: %s\n", c.fs.Name(), fmt.Sprintf(format, args...))
	c.printUsageLine(s.stderr)
	return exitUsage
}

// printUsageLine prints the short usage that follows a usage error.
func (c *command) printUsageLine(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n(\"withruntime %s --help\" lists the flags)\n", c.usage, c.fs.Name())
}

func (c *command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n", c.usage)
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", c.about)
	}
	first := true
	c.fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintln(w, "\nflags:")
			first = false
		}
		name, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
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
