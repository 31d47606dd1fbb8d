package srtlaunch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Expected values follow srt-slurm's frontends/sglang.py and the
// frontend_type == "sglang" branch of backends/sglang.py (v1.0.68).
func TestRenderSGLangRouter(t *testing.T) {
	procs := render(t, "sglang-router.yaml", 2, 0)
	assert.Equal(t, []string{"infra.out", "gb200-01_prefill_w0.out", "gb200-01_prefill_w1.out", "gb200-02_decode_w0.out",
		"gb200-01_router_0.out", "benchmark.out"}, outputs(procs))
	r := procs[4]
	assert.Equal(t, []string{"python", "-m", "sglang_router.launch_router", "--pd-disaggregation",
		"--prefill", "http://10.0.0.1:6100", "7200", "--prefill", "http://10.0.0.1:6132", "7201",
		"--decode", "grpc://10.0.0.2:6100", "--host", "0.0.0.0", "--port", "8000", "--policy", "round_robin", "--mini-lb"}, r.Command)
	assert.Equal(t, []string{"R"}, r.EnvKeys(), "only frontend.env")
	assert.Nil(t, r.MPI)
	assert.Equal(t, "bash", r.Argv[len(r.Argv)-3])
	assert.Equal(t, "export R=1 && "+r.CommandLine(), r.Argv[len(r.Argv)-1])

	w := procs[1]
	require.Equal(t, RolePrefill, w.Role)
	assert.Equal(t, []string{"python3", "-m", "sglang.launch_server", "--model-path", "/model", "--served-model-name", "Tiny-1B",
		"--host", "0.0.0.0", "--port", "6100", "--nccl-port", "17500", "--disaggregation-mode", "prefill",
		"--disaggregation-bootstrap-port", "7200", "--tp-size", "2"}, w.Command, "no --dump-config-to, no --request-plane")
	assert.Nil(t, w.BashPreamble, "no dynamo install behind the SGLang router")
	b := procs[5]
	assert.Equal(t, "sglang", env(b)["SRTCTL_FRONTEND_TYPE"])
	// benchmark_stage._get_sa_bench_slow_down_env: decode leaders, times as floats.
	assert.Equal(t, []string{"SRTCTL_FRONTEND_TYPE", "SRT_FRONTEND_HOST", "SRT_FRONTEND_PORT", "SA_BENCH_SLOW_DOWN_URLS",
		"SA_BENCH_SLOW_DOWN_SLEEP_TIME", "SA_BENCH_SLOW_DOWN_WAIT_TIME"}, b.EnvKeys())
	assert.Equal(t, "http://10.0.0.2:6100", env(b)["SA_BENCH_SLOW_DOWN_URLS"])
	assert.Equal(t, "2.0", env(b)["SA_BENCH_SLOW_DOWN_SLEEP_TIME"])
	assert.Equal(t, "0.5", env(b)["SA_BENCH_SLOW_DOWN_WAIT_TIME"])
}
