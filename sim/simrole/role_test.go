package simrole

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/inferencex/resultfile"
	"github.com/sweepflow/sweepflow/internal/testnet"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// started is one role running in-process.
type started struct {
	log    *syncBuf
	addrs  map[string]string
	done   chan error
	cancel context.CancelFunc
}

func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// start runs a role and, when wait, waits until it listens.
func start(t *testing.T, role string, argv []string, env map[string]string, o Options, wait bool) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{log: &syncBuf{}, done: make(chan error, 1), cancel: cancel}
	ready := make(chan map[string]string, 1)
	o.Getenv = func(k string) string { return env[k] }
	o.Environ = environ(env)
	o.Stdout = s.log
	o.Stderr = s.log
	if o.BindHost == "" {
		o.BindHost = "127.0.0.1"
	}
	o.Ready = func(a map[string]string) { ready <- a }
	go func() { s.done <- Run(ctx, role, argv, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			t.Errorf("role %s did not stop", role)
		}
	})
	if !wait {
		return s
	}
	select {
	case s.addrs = <-ready:
	case err := <-s.done:
		t.Fatalf("role %s exited before listening: %v\n%s", role, err, s.log)
	case <-time.After(20 * time.Second):
		t.Fatalf("role %s did not listen\n%s", role, s.log)
	}
	return s
}

func getJSON(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func workerArgv(mode string, port, nnodes, rank int, distInit string, tp int) []string {
	a := []string{"python3", "-m", "dynamo.sglang", "--model-path", "/model", "--served-model-name", "sim-model",
		"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--nccl-port", "17500"}
	if mode != "" {
		a = append(a, "--disaggregation-mode", mode)
	}
	if mode == "prefill" {
		a = append(a, "--disaggregation-bootstrap-port", "7200")
	}
	if distInit != "" {
		a = append(a, "--dist-init-addr", distInit)
	}
	a = append(a, "--nnodes", strconv.Itoa(nnodes), "--node-rank", strconv.Itoa(rank), "--request-plane", "tcp",
		"--data-parallel-size", strconv.Itoa(tp), "--enable-dp-attention", "--expert-parallel-size", strconv.Itoa(tp),
		"--speculative-algorithm", "DSPARK", "--speculative-num-draft-tokens", "6", "--tensor-parallel-size", strconv.Itoa(tp),
		"--trust-remote-code", "--hicache-size", "160")
	return a
}

// TestRolesEndToEnd brings up a 1P1D deployment of roles on 127.0.0.1
// (infra, a two-node prefill worker, a decode worker, a frontend, nginx),
// checks registration through the frontend's /health, streams a completion
// through nginx -> frontend -> decode worker, runs the benchmark role and
// reads its result file back, and finally breaks the prefill group.
func TestRolesEndToEnd(t *testing.T) {
	tmp := t.TempDir()
	logs, ix := filepath.Join(tmp, "logs"), filepath.Join(tmp, "ix")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	mounts := fmt.Sprintf(`{"/logs": %q, "/infmax-workspace": %q}`, logs, ix)

	infra := start(t, RoleInfra, []string{"python3", "/tmp/setup_head.py", "--name", "e2e", "--log-dir", "/logs", "--nats-max-payload-mb", "64"},
		map[string]string{EnvMounts: mounts}, Options{InfraHTTP: "127.0.0.1:0", InfraNATS: "127.0.0.1:0"}, true)
	code, body := getJSON(t, "http://"+infra.addrs["etcd"]+"/health")
	require.Equal(t, http.StatusOK, code, string(body))
	nc, err := net.Dial("tcp", infra.addrs["nats"])
	require.NoError(t, err)
	info, err := bufio.NewReader(nc).ReadString('\n')
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(info, "INFO "), info)
	nc.Close()

	common := func(extra map[string]string) map[string]string {
		m := map[string]string{"ETCD_ENDPOINTS": "http://" + infra.addrs["etcd"], "NATS_SERVER": "nats://" + infra.addrs["nats"],
			EnvTimeScale: "0.001", EnvMounts: mounts, "SLURM_JOB_ID": "4242", "PYTHONUNBUFFERED": "1"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	golden := map[string]string{"SGLANG_SIMULATE_ACC_LEN": "3.77", "SGLANG_SIMULATE_ACC_METHOD": "match-expected", "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}
	withGolden := func(port int) map[string]string {
		m := common(map[string]string{"DYN_SYSTEM_PORT": strconv.Itoa(port)})
		for k, v := range golden {
			m[k] = v
		}
		return m
	}

	// A two-node prefill worker: the leader waits for its member.
	rdv := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	prefillSys := testnet.FreePort(t)
	prefillArgv := workerArgv("prefill", testnet.FreePort(t), 2, 0, rdv, 8)
	prefill := start(t, RoleWorker, prefillArgv, withGolden(prefillSys), Options{}, false)
	member := start(t, RoleWorker, workerArgv("prefill", 0, 2, 1, rdv, 8), withGolden(testnet.FreePort(t)), Options{}, true)
	_ = member
	decodeArgv := workerArgv("decode", testnet.FreePort(t), 1, 0, "", 16)
	decode := start(t, RoleWorker, decodeArgv, withGolden(testnet.FreePort(t)), Options{}, true)

	fport := testnet.FreePort(t)
	fe := start(t, RoleFrontend, []string{"python3", "-m", "dynamo.frontend", fmt.Sprintf("--http-port=%d", fport), "--router-mode", "kv"},
		common(nil), Options{}, true)
	feURL := "http://" + fe.addrs["http"]

	// Registration, counted as srt-slurm counts it.
	var h srtlaunch.FrontendHealth
	require.Eventually(t, func() bool {
		code, body := getJSON(t, feURL+"/health")
		if code != http.StatusOK {
			return false
		}
		h, err = srtlaunch.ParseFrontendHealth(body)
		require.NoError(t, err)
		p, d := h.Workers()
		return p == 1 && d == 1
	}, 20*time.Second, 50*time.Millisecond, "frontend never saw 1 prefill + 1 decode: %+v\nprefill log:\n%s", h, prefill.log)
	code, body = getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/health", prefillSys))
	assert.Equal(t, http.StatusOK, code, string(body))
	code, body = getJSON(t, feURL+"/v1/models")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), `"id":"sim-model"`)

	// nginx in front of the frontend, reading its conf through the mounts.
	nport := testnet.FreePort(t)
	conf := fmt.Sprintf("events {}\nhttp {\n upstream backends {\n  hash $http_x_dynamo_session_id consistent;\n  server 127.0.0.1:%d;\n }\n server {\n  listen %d;\n  location / { proxy_pass http://backends; }\n }\n}\n", fport, nport)
	require.NoError(t, os.WriteFile(filepath.Join(logs, "nginx.conf"), []byte(conf), 0o644))
	start(t, RoleNginx, []string{"bash", "-c", "nginx -c /logs/nginx.conf -g 'daemon off;'"}, map[string]string{EnvMounts: mounts}, Options{}, true)
	nginxURL := fmt.Sprintf("http://127.0.0.1:%d", nport)

	// A streamed completion through nginx -> frontend -> decode worker.
	req, _ := http.NewRequest(http.MethodPost, nginxURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"sim-model","stream":true,"max_tokens":24,"ignore_eos":true,"messages":[{"role":"user","content":"hello there"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Dynamo-Session-ID", "s1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("X-Sweepflow-Simulated"))
	chunks, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			if d == "[DONE]" {
				done = true
				continue
			}
			var c map[string]any
			require.NoError(t, json.Unmarshal([]byte(d), &c), d)
			chunks++
		}
	}
	resp.Body.Close()
	assert.True(t, done, "stream ended with [DONE]")
	assert.Greater(t, chunks, 2, "several SSE chunks came through")
	assert.Contains(t, decode.log.String(), "SIMULATED engine up: 1P1D DEP8/DEP16", "decode leader modelled the whole deployment")

	// The header lines report the argv and environment as received.
	argv, env, err := ParseLog(strings.NewReader(decode.log.String()))
	require.NoError(t, err)
	assert.Equal(t, decodeArgv, argv)
	assert.Equal(t, "3.77", env["SGLANG_SIMULATE_ACC_LEN"])
	assert.NotContains(t, env, "SLURM_JOB_ID")
	assert.NotContains(t, env, EnvTimeScale)
	assert.Contains(t, decode.log.String(), "acceptance length 3.77 (synthetic true)")

	// The benchmark role writes InferenceX's per-point file.
	benchEnv := map[string]string{
		"MODEL": "sim-model", "MODEL_PREFIX": "dsv4", "FRAMEWORK": "dynamo-sglang", "PRECISION": "fp4", "CONC": "2",
		"RESULT_FILENAME": "e2e_point", "DURATION": "400", "RESULT_DIR": "/logs/agentic", "INFMAX_CONTAINER_WORKSPACE": "/infmax-workspace",
		"SRT_FRONTEND_HOST": "127.0.0.1", "SRT_FRONTEND_PORT": strconv.Itoa(nport), "KV_OFFLOADING": "none", "IS_MULTINODE": "true",
		"DISAGG": "true", "PREFILL_NUM_WORKERS": "1", "PREFILL_TP": "8", "PREFILL_EP": "8", "PREFILL_DP_ATTN": "true",
		"DECODE_NUM_WORKERS": "1", "DECODE_TP": "16", "DECODE_EP": "16", "DECODE_DP_ATTN": "true",
		"AIPERF_EXPERIMENTAL_FAST": "true", EnvTimeScale: "0.001", EnvMounts: mounts,
	}
	bench := &syncBuf{}
	err = Run(context.Background(), RoleBenchmark, []string{"bash", "-lc", "bash /infmax-workspace/benchmarks/multi_node/agentic_srt.sh"},
		Options{Getenv: func(k string) string { return benchEnv[k] }, Environ: environ(benchEnv), Stdout: bench, Stderr: bench})
	require.NoError(t, err, bench.String())
	r, err := resultfile.Read(filepath.Join(ix, "e2e_point_conc2.json"))
	require.NoError(t, err, bench.String())
	require.NoError(t, r.Gate())
	assert.Equal(t, 2, r.Conc)
	assert.True(t, r.Simulated)
	assert.Equal(t, 24, r.NumGPUs())
	p := r.Perf()
	t.Logf("benchmark role point (simulated): %d/%d requests ok, %+v", r.NumRequestsSuccess, r.NumRequestsTotal, p)
	assert.Greater(t, p.OutputTputPerGPU, 0.0)
	assert.Greater(t, p.TputPerGPU, p.OutputTputPerGPU*16/24, "input tokens dominate agentic traffic")
	assert.Greater(t, p.TTFTp90Ms, 0.0)
	assert.Greater(t, p.Interactivity, 1.0)
	assert.Less(t, p.Interactivity, 10000.0)
	assert.FileExists(t, filepath.Join(logs, "agentic", "conc_2", "sweepflow_loadgen_aggregate.json"))

	// Losing a member breaks the prefill group: its leader exits non-zero.
	member.cancel()
	select {
	case err := <-prefill.done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "node-rank 1 left the group")
		prefill.done <- err // for cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("the prefill leader kept running without its member")
	}
}

func TestRoleUsageAndEnvErrors(t *testing.T) {
	tests := []struct {
		name  string
		role  string
		argv  []string
		env   map[string]string
		want  string
		usage bool
	}{
		{"unknown role", "mocker-worker", []string{"x"}, nil, "unknown role", true},
		{"no argv", RoleInfra, nil, nil, "no command after --", true},
		{"bad mounts", RoleInfra, []string{"python3", "/tmp/setup_head.py"}, map[string]string{EnvMounts: "nope"}, EnvMounts, false},
		{"worker refuses", RoleWorker, edit(seedPrefill(), "--disaggregation-bootstrap-port", ""), nil, "needs --disaggregation-bootstrap-port", false},
		{"worker without registry", RoleWorker, workerArgv("", 0, 1, 0, "", 8), nil, "ETCD_ENDPOINTS is not set", false},
		{"benchmark missing env", RoleBenchmark, []string{"bash", "-lc", "bash x.sh"}, map[string]string{"MODEL": "m"}, "missing: MODEL_PREFIX, FRAMEWORK, PRECISION, CONC, RESULT_FILENAME, DURATION", false},
		{"nginx without conf", RoleNginx, []string{"bash", "-c", "nginx -c /logs/none.conf"}, nil, "open() \"/logs/none.conf\"", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(context.Background(), tc.role, tc.argv, Options{Getenv: func(k string) string { return tc.env[k] }, Environ: environ(tc.env), Stdout: &out, Stderr: &out})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.usage, strings.Contains(err.Error(), "usage"), err.Error())
			if !tc.usage {
				argv, _, perr := ParseLog(&out)
				require.NoError(t, perr, "the header comes first, even when the role then fails")
				assert.Equal(t, tc.argv, argv)
			}
		})
	}
}

// TestRendezvous: the leader's status port answers (not ready) while it
// waits for its group, refuses a member that does not fit, and admits the
// right one.
func TestRendezvous(t *testing.T) {
	reg := start(t, RoleInfra, []string{"python3", "/tmp/setup_head.py", "--name", "r"}, nil,
		Options{InfraHTTP: "127.0.0.1:0", InfraNATS: "127.0.0.1:0"}, true)
	env := func(sys int) map[string]string {
		return map[string]string{"ETCD_ENDPOINTS": "http://" + reg.addrs["etcd"], "DYN_SYSTEM_PORT": strconv.Itoa(sys), EnvTimeScale: "0.001"}
	}
	rdv := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	sys := testnet.FreePort(t)
	leader := start(t, RoleWorker, workerArgv("decode", testnet.FreePort(t), 2, 0, rdv, 8), env(sys), Options{}, false)
	require.Eventually(t, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", sys))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 10*time.Second, 20*time.Millisecond, "status port answers 503 while the group forms")

	wrong := start(t, RoleWorker, workerArgv("decode", 0, 4, 1, rdv, 8), env(testnet.FreePort(t)), Options{}, false)
	select {
	case err := <-wrong.done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "refused: rank 1 of 4 does not fit a group of 2")
		wrong.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("a member of the wrong group size was not refused")
	}

	start(t, RoleWorker, workerArgv("decode", 0, 2, 1, rdv, 8), env(testnet.FreePort(t)), Options{}, true)
	require.Eventually(t, func() bool {
		code, _ := getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/health", sys))
		return code == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	assert.Contains(t, leader.log.String(), "node-rank 1 joined (2/2)")
}

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
