package simrole

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/testnet"
)

func TestRouterArgs(t *testing.T) {
	a, err := ParseRouterArgs(strings.Fields("python -m sglang_router.launch_router --pd-disaggregation --prefill http://10.0.0.1:6100 7200 --prefill http://10.0.0.2:6100 --decode http://10.0.0.3:6100 --host 0.0.0.0 --port 8180 --policy round_robin"))
	require.NoError(t, err)
	assert.True(t, a.PD)
	assert.Equal(t, 8180, a.Port)
	assert.Equal(t, []RouterWorker{{URL: "http://10.0.0.1:6100", Type: "prefill", BootstrapPort: 7200}, {URL: "http://10.0.0.2:6100", Type: "prefill"},
		{URL: "http://10.0.0.3:6100", Type: "decode"}}, a.Workers)
	assert.Equal(t, []string{"policy"}, a.Unknown)

	tests := []struct {
		name, args, want string
	}{
		{"no workers", "--host 0.0.0.0 --port 8180", "no workers given"},
		{"empty worker-urls", "--worker-urls --port 8180", "no workers given"},
		{"pd without decode", "--pd-disaggregation --prefill http://10.0.0.1:6100 7200", "needs at least one --prefill and one --decode worker (got 1 prefill, 0 decode)"},
		{"prefill without pd", "--prefill http://10.0.0.1:6100 --decode http://10.0.0.2:6100", "--prefill and --decode need --pd-disaggregation"},
		{"mixed", "--pd-disaggregation --worker-urls http://10.0.0.1:6100 --prefill http://10.0.0.1:6100 --decode http://10.0.0.2:6100", "--worker-urls cannot be used with --pd-disaggregation"},
		{"bad url", "--worker-urls 10.0.0.1:6100", `argument --worker-urls: "10.0.0.1:6100" is not an http://HOST:PORT worker URL`},
		{"bad bootstrap", "--pd-disaggregation --prefill http://10.0.0.1:6100 x --decode http://10.0.0.2:6100", `bootstrap port "x" is not a port`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRouterArgs(append(strings.Fields("python -m sglang_router.launch_router"), strings.Fields(tc.args)...))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), routerProg+": error: "), err.Error())
		})
	}
}

// TestRouterRoutes: the SGLang router spreads completions over the
// aggregated workers it was given, counts them in /workers once they are
// healthy, and never sends to a worker it was not given.
func TestRouterRoutes(t *testing.T) {
	infra := startInfra(t)
	var urls []string
	var engines []string
	for i := 0; i < 3; i++ {
		port := testnet.FreePort(t)
		argv := strings.Fields(fmt.Sprintf("python3 -m sglang.launch_server --model-path /model --served-model-name sim-agg --host 127.0.0.1 --port %d --tensor-parallel-size 4 --speculative-algo EAGLE --speculative-num-draft-tokens 4", port))
		w := start(t, RoleWorker, argv, map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"], EnvTimeScale: "0.001"}, Options{}, true)
		engines = append(engines, w.addrs["engine"])
		if i < 2 { // the third worker is not the router's
			urls = append(urls, "http://"+w.addrs["engine"])
		}
	}
	rport := testnet.FreePort(t)
	rt := start(t, RoleRouter, append(append([]string{"python", "-m", "sglang_router.launch_router", "--worker-urls"}, urls...),
		"--host", "0.0.0.0", "--port", strconv.Itoa(rport), "--policy", "round_robin"), nil, Options{}, true)
	rURL := "http://" + rt.addrs["http"]
	var workers struct {
		Total int            `json:"total"`
		Stats map[string]int `json:"stats"`
	}
	require.Eventually(t, func() bool {
		_, body := getJSON(t, rURL+"/workers")
		require.NoError(t, json.Unmarshal(body, &workers))
		return workers.Stats["regular_count"] == 2
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, 2, workers.Total)
	assert.Equal(t, 0, workers.Stats["prefill_count"]+workers.Stats["decode_count"])

	for i := 0; i < 6; i++ {
		postCompletion(t, rURL, "sim-agg")
	}
	requests := func(addr string) int {
		_, body := getJSON(t, "http://"+addr+"/metrics")
		m := regexp.MustCompile(`(?m)^sglang:num_requests_total\S* (\d+)`).FindStringSubmatch(string(body))
		require.Len(t, m, 2, string(body))
		n, _ := strconv.Atoi(m[1])
		return n
	}
	assert.Equal(t, []int{3, 3, 0}, []int{requests(engines[0]), requests(engines[1]), requests(engines[2])}, "round robin over the given workers only")
	info := simInfo(t, engines[0])
	assert.InDelta(t, 2.734375, info["acceptance_length"], 1e-12, "--speculative-algo is sglang's --speculative-algorithm")
}

// TestRouterNoHealthyWorker: a router whose workers are down answers 503
// and counts none.
func TestRouterNoHealthyWorker(t *testing.T) {
	dead := fmt.Sprintf("http://127.0.0.1:%d", testnet.FreePort(t))
	rt := start(t, RoleRouter, []string{"python", "-m", "sglang_router.launch_router", "--worker-urls", dead, "--port", strconv.Itoa(testnet.FreePort(t))}, nil, Options{}, true)
	rURL := "http://" + rt.addrs["http"]
	time.Sleep(200 * time.Millisecond)
	_, body := getJSON(t, rURL+"/workers")
	assert.Contains(t, string(body), `"regular_count":0`)
	resp, err := http.Post(rURL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

// TestRouterPD: with --pd-disaggregation the router counts prefill and
// decode workers as srt-slurm's health check reads them and sends
// completions to the decode workers only (the simulated decode worker
// models its prefill side).
func TestRouterPD(t *testing.T) {
	var hits [2]atomic.Int64
	var urls [2]string
	for i := range urls {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/health" {
				hits[i].Add(1)
			}
			writeJSON(w, http.StatusOK, map[string]any{"model": "m", "simulated": true})
		}))
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	rt := start(t, RoleRouter, []string{"python", "-m", "sglang_router.launch_router", "--pd-disaggregation", "--prefill", urls[0], "7200",
		"--decode", urls[1], "--port", strconv.Itoa(testnet.FreePort(t))}, nil, Options{}, true)
	rURL := "http://" + rt.addrs["http"]
	var workers struct {
		Workers []map[string]any `json:"workers"`
		Stats   map[string]int   `json:"stats"`
	}
	require.Eventually(t, func() bool {
		_, body := getJSON(t, rURL+"/workers")
		require.NoError(t, json.Unmarshal(body, &workers))
		return workers.Stats["prefill_count"] == 1 && workers.Stats["decode_count"] == 1
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, 0, workers.Stats["regular_count"])
	assert.Equal(t, 7200.0, workers.Workers[0]["bootstrap_port"])
	for i := 0; i < 3; i++ {
		postCompletion(t, rURL, "m")
	}
	assert.Equal(t, []int64{0, 3}, []int64{hits[0].Load(), hits[1].Load()})
}
