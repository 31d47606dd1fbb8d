package simrole

import (
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/internal/testnet"
)

// startInfra runs the registry on 127.0.0.1.
func startInfra(t *testing.T) *started {
	t.Helper()
	return start(t, RoleInfra, []string{"python3", "/tmp/setup_head.py", "--name", "engines"}, nil,
		Options{InfraHTTP: "127.0.0.1:0", InfraNATS: "127.0.0.1:0"}, true)
}

// postCompletion sends a non-streaming completion and returns the answer.
func postCompletion(t *testing.T, url, model string) map[string]any {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"prompt":"hello there","max_tokens":16,"ignore_eos":true}`, model)))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Equal(t, "true", resp.Header.Get("X-Sweepflow-Simulated"))
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), string(b))
	return out
}

// waitWorkers waits until the frontend counts prefill and decode workers as
// srt-slurm does.
func waitWorkers(t *testing.T, feURL string, prefill, decode int) srtlaunch.FrontendHealth {
	t.Helper()
	var h srtlaunch.FrontendHealth
	require.Eventually(t, func() bool {
		code, body := getJSON(t, feURL+"/health")
		if code != http.StatusOK {
			return false
		}
		var err error
		h, err = srtlaunch.ParseFrontendHealth(body)
		require.NoError(t, err)
		p, d := h.Workers()
		return p == prefill && d == decode
	}, 20*time.Second, 50*time.Millisecond, "frontend never saw %d prefill + %d decode", prefill, decode)
	return h
}

func simInfo(t *testing.T, engineAddr string) map[string]any {
	t.Helper()
	code, body := getJSON(t, "http://"+engineAddr+"/sim/info")
	require.Equal(t, http.StatusOK, code, string(body))
	var info map[string]any
	require.NoError(t, json.Unmarshal(body, &info))
	return info
}

// TestTRTLLMDeployment: a DEP4 prefill worker (one node) and a DEP8 decode
// worker (two nodes, one srun task for the world) behind a dynamo
// frontend: both register, srt-slurm's count sees 1 prefill + 1 decode,
// completions are served by the decode worker, which models the whole
// deployment; a rank > 0 of an MPI step holds its place without
// registering.
func TestTRTLLMDeployment(t *testing.T) {
	logs, _ := writeLogs(t, map[string]string{"trtllm_config_prefill.yaml": trtPrefillYAML, "trtllm_config_decode.yaml": trtDecodeYAML})
	infra := startInfra(t)
	env := func(extra ...string) map[string]string {
		m := map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"], EnvTimeScale: "0.001",
			EnvMounts: fmt.Sprintf(`{"/logs": %q}`, logs), "DYN_SYSTEM_PORT": strconv.Itoa(testnet.FreePort(t)),
			"TRTLLM_ENABLE_PDL": "1", "SLURM_STEP_NUM_NODES": "1"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	prefillEnv := env()
	prefill := start(t, RoleTRTLLM, trtllmArgv("prefill", "trtllm_config_prefill.yaml"), prefillEnv, Options{}, true)
	// The decode worker: rank 0 of a step of one task per node on two nodes.
	decode := start(t, RoleTRTLLM, trtllmArgv("decode", "trtllm_config_decode.yaml"),
		env("SLURM_STEP_NUM_NODES", "2", "SLURM_STEP_NUM_TASKS", "2", "SLURM_PROCID", "0"), Options{}, true)
	// Rank 2 of the prefill worker as srt-slurm launches it (4 tasks, one
	// per GPU): no listener, no registration; it watches rank 0.
	rank2 := start(t, RoleTRTLLM, trtllmArgv("prefill", "trtllm_config_prefill.yaml"),
		env("SLURM_NTASKS", "4", "SLURM_PROCID", "2", "SLURM_STEP_NODELIST", "127.0.0.1", "DYN_SYSTEM_PORT", prefillEnv["DYN_SYSTEM_PORT"]), Options{}, false)

	fe := start(t, RoleFrontend, []string{"python3", "-m", "dynamo.frontend", fmt.Sprintf("--http-port=%d", testnet.FreePort(t))},
		map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"]}, Options{}, true)
	feURL := "http://" + fe.addrs["http"]
	h := waitWorkers(t, feURL, 1, 1)
	comps := map[string]bool{}
	for _, in := range h.Instances {
		comps[in.Component] = true
	}
	assert.Equal(t, map[string]bool{"prefill": true, "tensorrt_llm": true}, comps)
	code, body := getJSON(t, "http://127.0.0.1:"+prefillEnv["DYN_SYSTEM_PORT"]+"/health")
	assert.Equal(t, http.StatusOK, code, string(body))

	out := postCompletion(t, feURL, "dsr1")
	assert.Equal(t, "dsr1", out["model"])
	assert.Contains(t, decode.log.String(), "SIMULATED engine up: 1P1D DEP4/DEP8", "the decode worker models the whole deployment")
	info := simInfo(t, decode.addrs["engine"])
	assert.Equal(t, 2.734375, info["acceptance_length"], "MTP-3's own acceptance")
	assert.Equal(t, 4.0, info["num_prefill_gpu"])
	assert.Equal(t, 8.0, info["num_decode_gpu"])
	assert.Contains(t, prefill.log.String(), "accepted and ignored 3 LLM API options: cache_transceiver_config cuda_graph_config disable_overlap_scheduler")

	require.Eventually(t, func() bool { return strings.Contains(rank2.log.String(), "MPI rank 2/4 (rank 0 serves the worker)") }, 10*time.Second, 20*time.Millisecond)
	select {
	case err := <-rank2.done:
		t.Fatalf("rank 2 exited: %v", err)
	default:
	}
	assert.NotContains(t, rank2.log.String(), "registered")

	// Rank 0 goes away: the held rank fails, as the MPI world would.
	require.Eventually(t, func() bool { return strings.Contains(rank2.log.String(), "MPI rank 2 sees rank 0 at") }, 10*time.Second, 20*time.Millisecond)
	prefill.cancel()
	select {
	case err := <-rank2.done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "MPI rank 2: rank 0 stopped answering at http://127.0.0.1:"+prefillEnv["DYN_SYSTEM_PORT"]+"/health")
		rank2.done <- err // for cleanup
	case <-time.After(15 * time.Second):
		t.Fatalf("rank 2 kept running without rank 0\n%s\nprefill:\n%s", rank2.log, prefill.log)
	}
}

// TestVLLMDeployment: a one-node prefill and a two-node decode vLLM worker
// (hybrid LB: one process per node, the DP-rank-0 process leads) with the
// perf run's synthetic acceptance length in --speculative-config: the
// decode worker's simulated engine uses that length.
func TestVLLMDeployment(t *testing.T) {
	infra := startInfra(t)
	env := func() map[string]string {
		return map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"], EnvTimeScale: "0.001",
			"DYN_SYSTEM_PORT": strconv.Itoa(testnet.FreePort(t)), "VLLM_PORT": "20000"}
	}
	prefillArgv := edit(edit(edit(vllmArgv("prefill", 0, "127.0.0.1", 1, vllmSyntheticSpec), "--data-parallel-size", "4"),
		"--data-parallel-address", ""), "--data-parallel-rpc-port", "")
	start(t, RoleVLLM, prefillArgv, env(), Options{}, true)
	rpc := testnet.FreePort(t)
	leaderSys := env()
	decode := start(t, RoleVLLM, vllmArgv("decode", 0, "127.0.0.1", rpc, vllmSyntheticSpec), leaderSys, Options{}, false)
	require.Eventually(t, func() bool { return strings.Contains(decode.log.String(), "waiting for 1 member(s)") }, 10*time.Second, 20*time.Millisecond)
	start(t, RoleVLLM, vllmArgv("decode", 1, "127.0.0.1", rpc, vllmSyntheticSpec), env(), Options{}, true)

	fe := start(t, RoleFrontend, []string{"python3", "-m", "dynamo.frontend", fmt.Sprintf("--http-port=%d", testnet.FreePort(t))},
		map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"]}, Options{}, true)
	feURL := "http://" + fe.addrs["http"]
	waitWorkers(t, feURL, 1, 1)
	out := postCompletion(t, feURL, "sim-vllm")
	assert.Equal(t, "sim-vllm", out["model"])

	addr := regexp.MustCompile(`SIMULATED engine listening on (\S+)`).FindStringSubmatch(decode.log.String())
	require.Len(t, addr, 2, decode.log.String())
	info := simInfo(t, addr[1])
	assert.Equal(t, 2.85, info["acceptance_length"], "the synthetic acceptance length from --speculative-config")
	assert.Equal(t, 4.0, info["num_prefill_gpu"])
	assert.Equal(t, 8.0, info["num_decode_gpu"])
	assert.Contains(t, decode.log.String(), "node-rank 1 joined (2/2)")
	assert.Contains(t, decode.log.String(), "acceptance length 2.85 (synthetic true)")
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
