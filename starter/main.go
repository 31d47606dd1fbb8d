// Command starter is the sweepflow user CLI: it plans, starts, watches and
// repairs benchmark sweeps, and hosts the simulator, load generator and eval
// tools that the sweeps use.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// command is one `starter <name>` subcommand. Each lives in its own file and
// registers itself from init, so features can be added without touching main.
type command struct {
	name    string // may contain a space for nested verbs, e.g. "sweep start"
	summary string
	run     func(args []string) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("starter: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// exitError carries an exit status without printing a stack trace.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	// Longest match first so "sweep start" wins over a hypothetical "sweep".
	for n := min(2, len(args)); n >= 1; n-- {
		name := strings.Join(args[:n], " ")
		if c, ok := commands[name]; ok {
			if err := c.run(args[n:]); err != nil {
				if ee, ok := err.(*exitError); ok {
					if ee.msg != "" {
						fmt.Fprintln(os.Stderr, "starter "+name+": "+ee.msg)
					}
					return ee.code
				}
				fmt.Fprintln(os.Stderr, "starter "+name+": "+err.Error())
				return 1
			}
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "starter: unknown command %q (see starter help)\n", strings.Join(args, " "))
	return 2
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: starter <command> [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-22s %s\n", n, commands[n].summary)
	}
}
