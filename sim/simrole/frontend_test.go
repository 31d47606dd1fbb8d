package simrole

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/resultfile"
	"github.com/sweepflow/sweepflow/internal/testnet"
)

// TestProxyChainC1 is the seed sweep's c1 point on loopback: the benchmark
// role replays the agentic trace at concurrency 1 through nginx -> dynamo
// frontend -> aggregated worker at the integration tests' time scale, and
// no request may fail. At c1 the simulated engine answers within a
// millisecond of reading a request's tens of kilobytes, which made the
// proxies cut 2-20% of the streams ("unexpected EOF", "Post ...: EOF")
// while they relayed request bodies unbuffered (see streamingProxy).
func TestProxyChainC1(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 4 s agentic replay")
	}
	const scale = "0.002" // the starter integration tests' --sim-time-scale
	tmp := t.TempDir()
	logs, ix := filepath.Join(tmp, "logs"), filepath.Join(tmp, "ix")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	mounts := fmt.Sprintf(`{"/logs": %q, "/infmax-workspace": %q}`, logs, ix)

	infra := start(t, RoleInfra, []string{"python3", "/tmp/setup_head.py", "--name", "c1", "--log-dir", "/logs"},
		map[string]string{EnvMounts: mounts}, Options{InfraHTTP: "127.0.0.1:0", InfraNATS: "127.0.0.1:0"}, true)
	common := map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"], "NATS_SERVER": "nats://" + infra.addrs["nats"],
		EnvTimeScale: scale, EnvMounts: mounts, "SGLANG_SIMULATE_ACC_LEN": "3.77", "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
		"SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}
	start(t, RoleWorker, workerArgv("", testnet.FreePort(t), 1, 0, "", 8), common, Options{}, true)
	fport := testnet.FreePort(t)
	fe := start(t, RoleFrontend, []string{"python3", "-m", "dynamo.frontend", fmt.Sprintf("--http-port=%d", fport)}, common, Options{}, true)
	require.Eventually(t, func() bool {
		code, body := getJSON(t, "http://"+fe.addrs["http"]+"/v1/models")
		return code == 200 && strings.Contains(string(body), `"id":"sim-model"`)
	}, 20*time.Second, 50*time.Millisecond, "the aggregated worker never registered")
	nport := testnet.FreePort(t)
	conf := fmt.Sprintf("events {}\nhttp {\n upstream backends {\n  server 127.0.0.1:%d;\n }\n server {\n  listen %d;\n  client_max_body_size 0;\n  location / { proxy_pass http://backends; proxy_buffering off; }\n }\n}\n", fport, nport)
	require.NoError(t, os.WriteFile(filepath.Join(logs, "nginx.conf"), []byte(conf), 0o644))
	start(t, RoleNginx, []string{"nginx", "-c", "/logs/nginx.conf"}, map[string]string{EnvMounts: mounts}, Options{}, true)

	benchEnv := map[string]string{
		"MODEL": "sim-model", "MODEL_PREFIX": "dsv4", "FRAMEWORK": "dynamo-sglang", "PRECISION": "fp4", "CONC": "1",
		// 2000 s of model time: 4 s of wall time at the time scale.
		"RESULT_FILENAME": "c1", "DURATION": "2000", "RESULT_DIR": "/logs/agentic", "INFMAX_CONTAINER_WORKSPACE": "/infmax-workspace",
		"SRT_FRONTEND_HOST": "127.0.0.1", "SRT_FRONTEND_PORT": strconv.Itoa(nport), "KV_OFFLOADING": "none", "IS_MULTINODE": "false",
		"TP": "8", "AIPERF_EXPERIMENTAL_FAST": "true", EnvTimeScale: scale, EnvMounts: mounts,
	}
	bench := &syncBuf{}
	err := Run(context.Background(), RoleBenchmark, []string{"bash", "/infmax-workspace/benchmarks/multi_node/agentic_srt.sh"},
		Options{Getenv: func(k string) string { return benchEnv[k] }, Environ: environ(benchEnv), Stdout: bench, Stderr: bench})
	require.NoError(t, err, bench.String())
	r, err := resultfile.Read(filepath.Join(ix, "c1_conc1.json"))
	require.NoError(t, err, bench.String())
	t.Logf("c1 through nginx -> frontend -> worker: %d/%d requests ok", r.NumRequestsSuccess, r.NumRequestsTotal)
	assert.Greater(t, r.NumRequestsSuccess, 50, "the replay ran long enough to hit the race")
	assert.Zero(t, r.RequestAccounting.RecordsErrorDropped, "no request may fail on a healthy chain:\n%s", bench)
}

func TestBufferBody(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"json", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions", io.NopCloser(strings.NewReader(tc.body)))
			require.NoError(t, err)
			r.ContentLength = -1
			require.NoError(t, bufferBody(r))
			assert.Equal(t, int64(len(tc.body)), r.ContentLength)
			got, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(got))
			if tc.body == "" {
				assert.Equal(t, http.NoBody, r.Body)
				return
			}
			again, err := r.GetBody()
			require.NoError(t, err)
			got, err = io.ReadAll(again)
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(got), "GetBody rewinds")
		})
	}
}
