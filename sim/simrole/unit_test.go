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

func TestShellWordsAndEntryWords(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want []string
	}{
		{"nginx as rendered", []string{"bash", "-c", "nginx -c /logs/nginx.conf -g 'daemon off;'"}, []string{"nginx", "-c", "/logs/nginx.conf", "-g", "daemon off;"}},
		{"benchmark as rendered", []string{"bash", "-lc", "bash /infmax-workspace/benchmarks/multi_node/agentic_srt.sh"}, []string{"bash", "/infmax-workspace/benchmarks/multi_node/agentic_srt.sh"}},
		{"double quotes and escapes", []string{"bash", "-c", `echo "a \"b\" c" d\ e`}, []string{"echo", `a "b" c`, "d e"}},
		{"plain argv unchanged", []string{"python3", "-m", "dynamo.sglang", "--port", "6100"}, []string{"python3", "-m", "dynamo.sglang", "--port", "6100"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EntryWords(tc.argv)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := ShellWords("echo 'open")
	assert.ErrorContains(t, err, "unterminated single quote")
}

func TestMounts(t *testing.T) {
	m, err := ParseMounts(`{"/logs": "/srv/job/logs", "/infmax-workspace": "/srv/ix", "/infmax-workspace/results": "/srv/results"}`)
	require.NoError(t, err)
	tests := []struct{ in, want string }{
		{"/logs/nginx.conf", "/srv/job/logs/nginx.conf"},
		{"/logs", "/srv/job/logs"},
		{"/logsother/x", "/logsother/x"},
		{"/infmax-workspace/a_conc4.json", "/srv/ix/a_conc4.json"},
		{"/infmax-workspace/results/x.json", "/srv/results/x.json"},
		{"/model/config.json", "/model/config.json"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, m.Host(tc.in), tc.in)
	}
	_, err = ParseMounts(`["/logs"]`)
	assert.ErrorContains(t, err, EnvMounts)
	_, err = ParseMounts(`{"logs": "/x"}`)
	assert.ErrorContains(t, err, "must be absolute")
}

func TestParseNginxConf(t *testing.T) {
	conf := `
worker_processes 1;
events { worker_connections 1024; }
http {
    upstream backends {
        hash $http_x_dynamo_session_id consistent;   # session affinity
        server 10.0.0.2:8180 max_fails=0;
        server 10.0.0.3:8180;
        keepalive 4096;
    }
    server {
        listen 8000;
        location / {
            proxy_pass http://backends;
            proxy_buffering off;
            proxy_set_header Connection "";
        }
    }
}
`
	c, err := ParseNginxConf("/logs/nginx.conf", []byte(conf))
	require.NoError(t, err)
	require.Contains(t, c.Upstreams, "backends")
	assert.Equal(t, []string{"10.0.0.2:8180", "10.0.0.3:8180"}, c.Upstreams["backends"].Servers)
	assert.Equal(t, "$http_x_dynamo_session_id", c.Upstreams["backends"].HashKey)
	require.Len(t, c.Servers, 1)
	assert.Equal(t, []string{"8000"}, c.Servers[0].Listen)
	assert.Equal(t, "http://backends", c.Servers[0].ProxyPass)

	bad := []struct{ name, conf, want string }{
		{"unclosed block", "http { server { listen 1;", "unexpected end of file"},
		{"no server", "http { }", "no server block"},
		{"empty upstream", "upstream u { }\nserver { listen 1; location / { proxy_pass http://u; } }", ":1: upstream u has no server"},
		{"server without proxy", "http {\n server { listen 8000; }\n}", "/x.conf:2: server block needs"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNginxConf("/x.conf", []byte(tc.conf))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
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
