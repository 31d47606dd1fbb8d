package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseOnly runs the command line through the real command tree but
// replaces the command's body, so parsing is tested without Temporal.
func parseOnly(t *testing.T, args []string) (*cobra.Command, []string, int, string) {
	t.Helper()
	root := newRoot()
	cmd, _, err := root.Find(args)
	require.NoError(t, err)
	var got []string
	cmd.RunE = func(_ *cobra.Command, a []string) error { got = a; return nil }
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	_, err = root.ExecuteC()
	code := 0
	if err != nil {
		code = exitFailure
		if ee, ok := err.(*exitError); ok {
			code = ee.code
		}
	}
	return cmd, got, code, err2s(err)
}

func err2s(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// requireExit asserts err is an exitError with the code and a message
// containing msg.
func requireExit(t *testing.T, err error, code int, msg string) {
	t.Helper()
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, code, ee.code)
	assert.Contains(t, ee.msg, msg)
}

func TestCLIFlagsAndPositionalsMixInAnyOrder(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		path  string
		pos   []string
		flags map[string]string
	}{
		{name: "schedule create: bool flag before the name", args: strings.Fields("schedule create --pause-on-failure NAME --cron X"),
			path: "starter schedule create", pos: []string{"NAME"}, flags: map[string]string{"pause-on-failure": "true", "cron": "X"}},
		{name: "schedule create: name first", args: strings.Fields("schedule create NAME --cron X --pause-on-failure"),
			path: "starter schedule create", pos: []string{"NAME"}, flags: map[string]string{"pause-on-failure": "true", "cron": "X"}},
		{name: "status --json ID", args: strings.Fields("status --json ID"),
			path: "starter status", pos: []string{"ID"}, flags: map[string]string{"json": "true"}},
		{name: "status ID --json", args: strings.Fields("status ID --json"),
			path: "starter status", pos: []string{"ID"}, flags: map[string]string{"json": "true"}},
		{name: "rerun: repeatable flag around the ID", args: strings.Fields("rerun --force perf OLD --force eval --id NEW"),
			path: "starter rerun", pos: []string{"OLD"}, flags: map[string]string{"force": "perf,eval", "id": "NEW"}},
		{name: "watch: flag=value form", args: strings.Fields("watch --interval=5s ID"),
			path: "starter watch", pos: []string{"ID"}, flags: map[string]string{"interval": "5s"}},
		{name: "retry several points then --reason", args: strings.Fields("retry P1 P2 --reason flaky"),
			path: "starter retry", pos: []string{"P1", "P2"}, flags: map[string]string{"reason": "flaky"}},
		{name: "skip --sweep alone", args: strings.Fields("skip --sweep S"),
			path: "starter skip", pos: []string{}, flags: map[string]string{"sweep": "S"}},
		{name: "schedule backfill", args: strings.Fields("schedule backfill --from 2026-01-01T00:00:00Z N --to 2026-01-02T00:00:00Z"),
			path: "starter schedule backfill", pos: []string{"N"}, flags: map[string]string{"from": "2026-01-01T00:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd, pos, code, msg := parseOnly(t, tc.args)
			require.Equal(t, 0, code, msg)
			assert.Equal(t, tc.path, cmd.CommandPath())
			assert.Equal(t, tc.pos, pos)
			for name, want := range tc.flags {
				f := cmd.Flags().Lookup(name)
				require.NotNil(t, f, name)
				got := f.Value.String()
				if f.Value.Type() == "strings" {
					got = strings.Trim(got, "[]")
				}
				assert.Equal(t, want, got, name)
			}
		})
	}
}

func TestCLIExitCodesAndMessages(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string // substrings
		stderr     []string
		notStdout  string
		wantStderr bool
	}{
		{name: "help exits 0 with the positional usage", args: []string{"status", "--help"}, code: 0,
			stdout: []string{"starter status SWEEP_ID [flags]", "--json"}},
		{name: "help of a nested command", args: []string{"schedule", "create", "--help"}, code: 0,
			stdout: []string{"starter schedule create NAME [flags]", "--pause-on-failure", `--cron string`, `(default "0 2 * * *")`}},
		{name: "help of rerun keeps defaults and help text", args: []string{"rerun", "-h"}, code: 0,
			stdout: []string{"starter rerun SWEEP_ID [flags]", "--inject-fault", "POINT:STAGE[:TIMES]", `(default "configs/sweeps/dsv4-gb200-agentx.yaml")`}},
		{name: "help of the decision commands", args: []string{"retry", "--help"}, code: 0,
			stdout: []string{"starter retry {POINT_WORKFLOW_ID... | --sweep SWEEP_ID} [flags]", "--hold"}},
		{name: "hold is a decision command", args: []string{"hold", "--help"}, code: 0,
			stdout: []string{"starter hold {POINT_WORKFLOW_ID... | --sweep SWEEP_ID} [flags]", "node hold"}, notStdout: "--hold"},
		{name: "abort takes no --hold", args: []string{"abort", "P", "--hold"}, code: 2,
			stderr: []string{"starter abort: unknown flag: --hold"}},
		{name: "help command", args: []string{"help", "watch"}, code: 0, stdout: []string{"starter watch SWEEP_ID [flags]", "--interval duration"}},
		{name: "root help lists the commands", args: []string{"--help"}, code: 0,
			stdout: []string{"sweep", "schedule", "status", "completion"}},
		{name: "no command is a usage error", args: nil, code: 2, stderr: []string{"Available Commands:"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2,
			stderr: []string{`starter: unknown command "frobnicate" (see starter --help)`}},
		{name: "unknown command suggests", args: []string{"statsu", "X"}, code: 2,
			stderr: []string{`starter: unknown command "statsu X"`, "did you mean stats or status?"}},
		{name: "unknown subcommand", args: []string{"schedule", "frob"}, code: 2,
			stderr: []string{`starter schedule: unknown command "frob" (see starter schedule --help)`}},
		{name: "group without subcommand", args: []string{"sweep"}, code: 2, stderr: []string{"starter sweep [command]"}},
		{name: "missing positional", args: []string{"status", "--json"}, code: 2,
			stderr: []string{"starter status: missing SWEEP_ID (usage: starter status SWEEP_ID [flags])"}},
		{name: "missing schedule name", args: []string{"schedule", "create", "--cron", "X"}, code: 2,
			stderr: []string{"starter schedule create: missing NAME"}},
		{name: "too many positionals", args: []string{"cancel", "A", "B"}, code: 2,
			stderr: []string{`starter cancel: unexpected argument "B"`}},
		{name: "stray positional on a flag-only command", args: []string{"plan", "extra"}, code: 2,
			stderr: []string{`starter plan: unexpected argument "extra"`}},
		{name: "unknown flag", args: []string{"status", "ID", "--nope"}, code: 2,
			stderr: []string{"starter status: unknown flag: --nope (see starter status --help)"}},
		{name: "single-dash long flag is not a long flag", args: []string{"status", "-json", "ID"}, code: 2,
			stderr: []string{"starter status: unknown shorthand flag: 'j' in -json"}},
		{name: "bad flag value", args: []string{"watch", "ID", "--interval", "soon"}, code: 2,
			stderr: []string{`starter watch: invalid argument "soon" for "--interval"`}},
		{name: "decision needs ids or --sweep", args: []string{"abort"}, code: 2,
			stderr: []string{"starter abort: give point workflow IDs or --sweep SWEEP_ID, not both"}},
		{name: "decision not both", args: []string{"abort", "P", "--sweep", "S"}, code: 2,
			stderr: []string{"starter abort: give point workflow IDs or --sweep SWEEP_ID, not both"}},
		{name: "backfill needs --from and --to", args: []string{"schedule", "backfill", "N"}, code: 2,
			stderr: []string{"starter schedule backfill: --from and --to are required"}},
		{name: "command error keeps its code and prefix", args: []string{"sim", "checkpoint"}, code: 2,
			stderr: []string{"starter sim checkpoint: --dir is required"}},
		{name: "completion", args: []string{"completion", "bash"}, code: 0, stdout: []string{"bash completion", "__start_starter"}},
		{name: "a bad adaptive request is a usage error before anything starts", args: []string{"sweep", "start", "--adaptive", "k=grow,max-points=2"}, code: 2,
			stderr: []string{`starter sweep start: --adaptive "k=grow,max-points=2": mode: want fill or slo, got "grow"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runIO(tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			for _, s := range tc.stdout {
				assert.Contains(t, stdout.String(), s)
			}
			for _, s := range tc.stderr {
				assert.Contains(t, stderr.String(), s)
			}
			if tc.notStdout != "" {
				assert.NotContains(t, stdout.String(), tc.notStdout)
			}
			if tc.code == 0 {
				assert.Empty(t, stderr.String())
			}
		})
	}
}

// TestCLIKeepsEveryCommand pins the command names scripts and docs use.
func TestCLIKeepsEveryCommand(t *testing.T) {
	root := newRoot()
	for _, path := range []string{
		"abort", "bench", "bench capacity", "bench forecast", "bench trace-gen", "cancel", "codec-server", "eval gsm8k", "eval gsm8k-score",
		"export", "forecast", "hold", "plan", "report", "rerun", "retry", "schedule backfill", "schedule create", "schedule delete",
		"schedule list", "server start", "server stop", "sim checkpoint", "sim serve", "skip", "stage", "status",
		"sweep start", "watch",
	} {
		cmd, rest, err := root.Find(strings.Fields(path))
		require.NoError(t, err, path)
		assert.Empty(t, rest, path)
		assert.Equal(t, "starter "+path, cmd.CommandPath())
		assert.NotEmpty(t, cmd.Short, path)
		assert.NotNil(t, cmd.Args, "%s validates its positional arguments", path)
	}
}
