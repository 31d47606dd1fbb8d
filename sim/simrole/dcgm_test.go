package simrole

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/internal/testnet"
)

func TestDCGMExporter(t *testing.T) {
	ex, _ := renderFeature(t, `name: pw
model: {path: /m/M, container: img}
resources: {gpu_type: gb300, gpus_per_node: 4, agg_nodes: 1}
backend: {type: sglang}
benchmark: {type: sa-bench, isl: 8, osl: 4, concurrencies: "1"}
telemetry: {enabled: true, dcgm_exporter: {container_image: dcgm-exporter, port: 19401}}
`, "telemetry_dcgm_exporter.out")
	a, err := ParseDCGMExporter(ex.Command)
	require.NoError(t, err, "dcgm-exporter accepts what srt-slurm launches")
	assert.Equal(t, ":19401", a.Address)
	assert.Equal(t, "100ms", a.CollectInterval.String())
	for _, tc := range []struct{ argv, want string }{
		{"dcgm-exporter --collect-interval=100 --port 9400", "flag provided but not defined: -port"},
		{"dcgm-exporter --collect-interval=fast", `invalid value "fast" for flag -collect-interval`},
		{"dcgm-exporter --address", "flag needs an argument: -address"},
		{"dcgm-exporter serve", `unexpected argument "serve"`},
	} {
		_, err := ParseDCGMExporter(strings.Fields(tc.argv))
		assert.ErrorContains(t, err, tc.want, tc.argv)
	}

	port := testnet.FreePort(t)
	env := map[string]string{"SLURMD_NODENAME": "gb300-07", EnvGPUsPerNode: "4"} // no job: no power board, every GPU idles
	s := start(t, RoleDCGM, strings.Fields(fmt.Sprintf("dcgm-exporter --collect-interval=100 --address :%d", port)), env, Options{}, true)
	assert.Contains(t, s.log.String(), LogPrefix+"env=")
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := 0
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, "DCGM_FI_DEV_POWER_USAGE{") {
			continue
		}
		lines++
		assert.Contains(t, l, `Hostname="gb300-07"`)
		assert.Contains(t, l, `modelName="NVIDIA GB300"`)
		assert.Contains(t, l, `simulated="true"`)
		v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64)
		require.NoError(t, err)
		assert.InDelta(t, energy.SimulatedGB200.IdleW, v, 1.61, "the model's idle draw within its 1%% ripple")
	}
	assert.Equal(t, 4, lines, "one sample per GPU of the node")
	assert.Contains(t, string(body), "SIMULATED")
}
