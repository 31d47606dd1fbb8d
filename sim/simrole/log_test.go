package simrole

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeaderAndParseLog(t *testing.T) {
	argv := []string{"python3", "-m", "dynamo.frontend", "--http-port=8180", "a b 'c'"}
	environ := []string{"A=1", "SGLANG_SIMULATE_ACC_LEN=3.77", "SWEEPFLOW_SIM_MOUNTS={}", "SLURM_JOB_ID=4242", "EMPTY=", "WITH_EQ=x=y"}
	var buf bytes.Buffer
	buf.WriteString("some preamble line\n")
	require.NoError(t, Header(&buf, argv, environ))
	buf.WriteString("later output\n")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4)
	assert.True(t, strings.HasPrefix(lines[1], "sweepflow-sim-role: argv=["))
	assert.True(t, strings.HasPrefix(lines[2], "sweepflow-sim-role: env={"))

	gotArgv, gotEnv, err := ParseLog(&buf)
	require.NoError(t, err)
	assert.Equal(t, argv, gotArgv)
	assert.Equal(t, map[string]string{"A": "1", "SGLANG_SIMULATE_ACC_LEN": "3.77", "EMPTY": "", "WITH_EQ": "x=y"}, gotEnv)
}

func TestParseLogErrors(t *testing.T) {
	tests := []struct{ name, log, want string }{
		{"no header", "hello\n", "no \"sweepflow-sim-role: \" lines"},
		{"argv only", "sweepflow-sim-role: argv=[\"x\"]\n", "no sweepflow-sim-role: env= line"},
		{"env only", "sweepflow-sim-role: env={}\n", "no sweepflow-sim-role: argv= line"},
		{"bad json", "x\nsweepflow-sim-role: argv=[\"x\"\n", "log line 2: argv"},
		{"damaged env, no intact one", "sweepflow-sim-role: argv=[\"x\"]\nsweepflow-sim-role: env={\"A\":\n", "log line 2: env"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseLog(strings.NewReader(tc.log))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Two tasks of a multi-node step share one output file; one task's lines
// can be overwritten in part by the other's. An intact pair still parses.
func TestParseLogSkipsALineAnotherTaskDamaged(t *testing.T) {
	log := "sweepflow-sim-role: argv=[\"python3\",\"-m\"]\n" +
		"sweepflow-sim-role: env={\"DECODE_TP\":\n" + // cut by the other task's write
		"sweepflow-sim-role: argv=[\"python3\",\"-m\"]\n" +
		"sweepflow-sim-role: env={\"DECODE_TP\":\"8\"}\n"
	argv, env, err := ParseLog(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, []string{"python3", "-m"}, argv)
	assert.Equal(t, map[string]string{"DECODE_TP": "8"}, env)
}

// The tasks of one step share its output file: only task 0 prints the
// contract lines, so a launcher's check of argv and env reads them whole.
func TestHeaderFromTaskZeroOnly(t *testing.T) {
	for procid, want := range map[string]bool{"": true, "0": true, "1": false} {
		var out bytes.Buffer
		env := map[string]string{"SLURM_PROCID": procid}
		err := Run(context.Background(), RoleTRTLLM, []string{"python3", "-m", "dynamo.trtllm"}, Options{
			Getenv: func(k string) string { return env[k] }, Environ: []string{"SLURM_PROCID=" + procid},
			Stdout: &out, Stderr: io.Discard,
		})
		require.Error(t, err, "a worker without its flags fails")
		assert.Equal(t, want, strings.Contains(out.String(), LogPrefix+"argv="), "SLURM_PROCID=%q: %s", procid, out.String())
	}
}
