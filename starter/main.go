// Command starter is the sweepflow user CLI: it plans, starts, watches and
// repairs benchmark sweeps, and hosts the simulator, load generator and eval
// tools that the sweeps use.
//
// The CLI is built on spf13/cobra: flags and positional arguments mix in any
// order, --help exits 0 and shows each command's positional usage, and
// `starter completion bash|zsh|fish|powershell` writes a completion script.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Exit statuses: 0 ok, 1 the command failed, 2 usage error. A few commands
// add their own (eval gsm8k 3: gate failed; stage 3: checksum mismatch).
const (
	exitFailure = 1
	exitUsage   = 2
)

// commands maps a command path ("sweep start") to its constructor. Each
// command lives in its own cmd_*.go file and registers itself from init, so
// features can be added without touching main.
var commands = map[string]func() *cobra.Command{}

func register(path string, newCmd func() *cobra.Command) {
	if _, dup := commands[path]; dup {
		panic("starter: duplicate command " + path)
	}
	commands[path] = newCmd
}

// exitError carries an exit status without printing a stack trace.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageError(format string, a ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes one command line and returns the exit status; errors are
// printed as `starter <command>: <message>` on stderr.
func run(args []string) int { return runIO(args, os.Stdout, os.Stderr) }

func runIO(args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetOut(stdout)
	root.SetErr(stderr)
	if args == nil {
		args = []string{} // cobra would read os.Args instead
	}
	// Commands with list flags (`--config-keys a b c`, InferenceX's
	// nargs='+') rewrite them before cobra parses.
	if c, _, err := root.Find(args); err == nil && c.Annotations[annotationListFlags] != "" {
		args = expandListArgs(args, strings.Split(c.Annotations[annotationListFlags], ","))
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	code, msg := exitFailure, err.Error()
	if ee, ok := errors.AsType[*exitError](err); ok {
		code, msg = ee.code, ee.msg
	}
	if msg != "" {
		fmt.Fprintln(stderr, cmd.CommandPath()+": "+msg)
	}
	return code
}

// newRoot builds the command tree from the registered commands. Commands
// whose parent is not registered itself ("sweep" for "sweep start") get a
// group command that lists its subcommands.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "starter",
		Short: "sweepflow: plan, run, watch and repair GPU inference benchmark sweeps on Temporal",
		Long: `starter is the sweepflow user CLI: it plans, starts, watches and repairs
benchmark sweeps, and hosts the simulator, load generator and eval tools that
the sweeps use.

Exit status: 0 ok, 1 the command failed, 2 usage error.`,
		Args:        cobra.ArbitraryArgs,
		RunE:        groupRun,
		Annotations: map[string]string{annotationGroup: "true"},
	}
	configure(root)
	// Groups run only to report a usage error: show just their subcommands.
	const runnable = "Usage:{{if .Runnable}}"
	tmpl := root.UsageTemplate()
	if !strings.Contains(tmpl, runnable) {
		panic("starter: cobra's usage template changed")
	}
	root.SetUsageTemplate(strings.Replace(tmpl, runnable, `Usage:{{if and .Runnable (not (index .Annotations "`+annotationGroup+`"))}}`, 1))
	paths := make([]string, 0, len(commands))
	for p := range commands {
		paths = append(paths, p)
	}
	// Parents first, so "bench" exists before "bench trace-gen" joins it.
	slices.SortFunc(paths, func(a, b string) int {
		if d := strings.Count(a, " ") - strings.Count(b, " "); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, p := range paths {
		words := strings.Fields(p)
		parent := root
		for _, w := range words[:len(words)-1] {
			parent = child(parent, w)
		}
		c := commands[p]()
		if c.Name() != words[len(words)-1] {
			panic(fmt.Sprintf("starter: command %q has Use %q", p, c.Use))
		}
		parent.AddCommand(c)
	}
	return root
}

// annotationGroup marks a command that only holds subcommands.
const annotationGroup = "sweepflow/group"

// groupShort describes the commands that only group subcommands.
var groupShort = map[string]string{
	"eval":     "accuracy evals against an OpenAI-compatible endpoint",
	"schedule": "nightly regression schedules",
	"server":   "the embedded Temporal dev server",
	"sim":      "the simulated engine and checkpoint",
	"sweep":    "plan and start sweeps",
}

// child returns parent's subcommand name, adding a group command if needed.
func child(parent *cobra.Command, name string) *cobra.Command {
	for _, c := range parent.Commands() {
		if c.Name() == name {
			return c
		}
	}
	short := groupShort[name]
	if short == "" {
		short = name + " commands"
	}
	g := &cobra.Command{Use: name, Short: short, Args: cobra.ArbitraryArgs, RunE: groupRun,
		Annotations: map[string]string{annotationGroup: "true"}}
	parent.AddCommand(g)
	return g
}

// groupRun runs a command that only holds subcommands: an unknown
// subcommand or none at all is a usage error (exit 2), as it always was.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		msg := fmt.Sprintf("unknown command %q (see %s --help)", strings.Join(args, " "), cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageError("%s", msg)
	}
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Usage()
	return &exitError{code: exitUsage}
}

// configure makes cobra return every error instead of printing it with the
// usage, and turns flag errors into usage errors (exit 2).
func configure(c *cobra.Command) {
	c.SilenceErrors = true
	c.SilenceUsage = true
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v (see %s --help)", err, c.CommandPath())
	})
}

// execute runs one command on its own with args, as the tests and
// in-process callers do; it returns the command's error unprinted.
func execute(ctx context.Context, c *cobra.Command, args []string, stdout, stderr io.Writer) error {
	configure(c)
	if args == nil {
		args = []string{}
	}
	if c.Annotations[annotationListFlags] != "" {
		args = expandListArgs(args, strings.Split(c.Annotations[annotationListFlags], ","))
	}
	c.SetArgs(args)
	if stdout != nil {
		c.SetOut(stdout)
	}
	if stderr != nil {
		c.SetErr(stderr)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return c.ExecuteContext(ctx)
}

// Positional argument validators. Their errors are usage errors (exit 2)
// that show the command's use line.

// noArgs accepts no positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q (usage: %s)", args[0], cmd.UseLine())
	}
	return nil
}

// exactArgs accepts exactly n positional arguments.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			what := "argument"
			if names := strings.Fields(cmd.Use)[1:]; len(args) < len(names) {
				what = names[len(args)]
			}
			return usageError("missing %s (usage: %s)", what, cmd.UseLine())
		case len(args) > n:
			return usageError("unexpected argument %q (usage: %s)", args[n], cmd.UseLine())
		}
		return nil
	}
}
