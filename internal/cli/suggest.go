package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// An unknown command is a usage error that names the whole command the
// user typed and, when one is close, the command meant: edit distance 2 or
// less, or a prefix, as cobra's suggestions; at the top, a verb without
// its noun ("create") suggests the noun's verb ("sandbox create").

// unknownCommand returns the path (below the program) of the first word of
// args that is not a command, and the group it was looked up in, or "" and
// nil when every word up to the first flag or argument of a verb is a
// command.
func unknownCommand(root *cobra.Command, args []string) (string, *cobra.Command) {
	c := root
	var path []string
	for _, a := range args {
		if a == "" || strings.HasPrefix(a, "-") || a == "help" || strings.HasPrefix(a, "__complete") || a == "completion" {
			return "", nil
		}
		if !c.HasSubCommands() {
			return "", nil
		}
		sub := findSub(c, a)
		if sub == nil {
			return strings.Join(append(path, a), " "), c
		}
		path = append(path, sub.Name())
		c = sub
	}
	return "", nil
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// suggest returns the command meant by the unknown word typed in group,
// as a path below the program, or "".
func suggest(group *cobra.Command, word string) string {
	prefix := strings.TrimPrefix(strings.TrimPrefix(group.CommandPath(), group.Root().Name()), " ")
	if prefix != "" {
		prefix += " "
	}
	if best := closest(group, word); best != "" {
		return prefix + best
	}
	if group.HasParent() {
		return ""
	}
	// A verb without its noun: the first noun that has it, sandbox first.
	nouns := group.Commands()
	if sb := findSub(group, "sandbox"); sb != nil {
		nouns = append([]*cobra.Command{sb}, nouns...)
	}
	for _, noun := range nouns {
		if !noun.HasSubCommands() || noun.Name() == "completion" {
			continue
		}
		if sub := findSub(noun, word); sub != nil {
			return noun.Name() + " " + sub.Name()
		}
	}
	for _, noun := range group.Commands() {
		if !noun.HasSubCommands() || noun.Name() == "completion" {
			continue
		}
		if best := closest(noun, word); best != "" {
			return noun.Name() + " " + best
		}
	}
	return ""
}

// closest returns the name of the available subcommand of c nearest to
// word: within edit distance 2, or that word is a prefix of; "" if none.
func closest(c *cobra.Command, word string) string {
	best, bestD := "", 3
	lw := strings.ToLower(word)
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() {
			continue
		}
		for _, name := range append([]string{sub.Name()}, sub.Aliases...) {
			d := editDistance(lw, strings.ToLower(name))
			if d > 2 && len(word) > 1 && strings.HasPrefix(strings.ToLower(name), lw) {
				d = 2
			}
			if d < bestD {
				best, bestD = sub.Name(), d
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// printUnknownCommand prints the usage error of an unknown command path
// typed in group and returns its exit code.
func printUnknownCommand(s streams, group *cobra.Command, path, word string) int {
	msg := fmt.Sprintf("unknown command %q", path)
	if sug := suggest(group, word); sug != "" {
		msg += fmt.Sprintf("; did you mean %q?", sug)
	}
	printError(s.stderr, "invalid_request", msg)
	printGroupUsageLine(s.stderr, group)
	return exitUsage
}
