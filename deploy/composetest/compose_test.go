package composetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/compose"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// dockerEngine reports why no Docker engine can be used, or nil.
func dockerEngine(ctx context.Context) (err error) {
	// The provider panics on some broken DOCKER_HOST settings.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("docker provider: %v", r)
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("%w (start dockerd or set DOCKER_HOST)", err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.Health(ctx); err != nil {
		return fmt.Errorf("%w (start dockerd or set DOCKER_HOST)", err)
	}
	return nil
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "docker-compose.yml"))
	return root
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// missing skips t with msg, or fails it under CI, where Docker and a GSM8K
// copy are set up: internal/prereq's rule (this module does not depend on
// the main one, so it cannot import it).
func missing(t *testing.T, msg string) {
	t.Helper()
	if v := strings.ToLower(strings.TrimSpace(os.Getenv("CI"))); v != "" && v != "false" && v != "0" {
		t.Fatalf("%s (CI=%s: a missing prerequisite fails)", msg, os.Getenv("CI"))
		return
	}
	t.Skip(msg)
}

// gsm8kDir is a directory holding GSM8K's splits for the workers:
// SWEEPFLOW_GSM8K_DIR, else the verified cache; "" when neither has them.
func gsm8kDir() string {
	cands := []string{os.Getenv("SWEEPFLOW_GSM8K_DIR")}
	if c, err := os.UserCacheDir(); err == nil {
		cands = append(cands, filepath.Join(c, "sweepflow", "gsm8k"))
	}
	for _, d := range cands {
		if d != "" && fileExists(filepath.Join(d, "test.jsonl")) && fileExists(filepath.Join(d, "train.jsonl")) {
			abs, _ := filepath.Abs(d)
			return abs
		}
	}
	return ""
}

func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

// The stack of scripts/stack.sh (docker-compose.yml on the local images of
// scripts/images.sh, with mTLS) runs the seed sweep (8 points) to the end;
// the ledger in the stack's PostgreSQL holds its rows, the report reads
// them, and a client without a certificate is refused.
func TestComposeStackSeedSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the compose stack test takes minutes")
	}
	// Ryuk (testcontainers' reaper) is an image from a registry, which this
	// machine has not: the stack is removed by the cleanup below instead.
	// Set before testcontainers reads its configuration (once).
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	ctx := context.Background()
	if err := dockerEngine(ctx); err != nil {
		missing(t, fmt.Sprintf("no Docker engine: %v", err))
	}
	su := upStack(t, ctx, "composetest", nil)
	certs, addr, results, starter := su.certs, su.addr, su.results, su.starter
	workerLogs := su.workerLogs

	t.Run("no certificate, no entry", func(t *testing.T) {
		ca, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(ca))
		for _, tt := range []struct {
			name string
			tls  *tls.Config
		}{
			{"TLS without a client certificate", &tls.Config{RootCAs: pool, ServerName: "temporal", MinVersion: tls.VersionTLS12}},
			{"plaintext", nil},
		} {
			opts := client.Options{HostPort: addr, Namespace: "default"}
			opts.ConnectionOptions.TLS = tt.tls
			c, err := client.NewLazyClient(opts)
			require.NoError(t, err, tt.name)
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			_, err = c.ListWorkflow(cctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"})
			assert.Error(t, err, "%s: list must be refused", tt.name)
			_, err = c.ExecuteWorkflow(cctx, client.StartWorkflowOptions{ID: "intruder", TaskQueue: "cluster-local-sim"}, "SweepWorkflow")
			assert.Error(t, err, "%s: start must be refused", tt.name)
			cancel()
			c.Close()
			t.Logf("%s: refused (%v)", tt.name, err)
		}
		// The same calls with the client certificate go through.
		out, err := starter("server", "setup", "--wait", "30s")
		require.NoError(t, err, out)
	})

	const id = "compose-seed"
	t0 := time.Now()
	out, err := starter("sweep", "start", "--sweep", "configs/sweeps/dsv4-gb200-agentx.yaml",
		"--cluster", "configs/clusters/local-sim.yaml", "--id", id, "--fast-retries", "--wait")
	require.NoError(t, err, "sweep start:\n%s\nworker logs:\n%s", lastLines(out, 40), lastLines(workerLogs(), 80))
	t.Logf("seed sweep on the stack: %s\n%s", time.Since(t0).Round(time.Second), lastLines(out, 14))

	out, err = starter("status", id, "--json")
	require.NoError(t, err, out)
	var st struct {
		Workflow string `json:"workflow_status"`
		Points   []struct {
			Status string `json:"status"`
			Perf   *struct {
				OutputTputPerGPU float64 `json:"output_tput_per_gpu"`
				Simulated        bool    `json:"simulated"`
			} `json:"perf"`
		} `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	assert.Equal(t, "completed", st.Workflow)
	require.Len(t, st.Points, 8)
	for i, p := range st.Points {
		assert.Equal(t, "completed", p.Status, "point %d", i)
		if assert.NotNil(t, p.Perf, "point %d", i) {
			assert.True(t, p.Perf.Simulated)
			assert.Greater(t, p.Perf.OutputTputPerGPU, 0.0)
		}
	}

	// The ledger in the stack's PostgreSQL, read from the host: one
	// InferenceX row per point, one eval row per evaluated point.
	exp := t.TempDir()
	out, err = starter("export", "--sweep", id, "--results", results, "--out", exp, "--json")
	require.NoError(t, err, out)
	var ex struct {
		Bmk  int `json:"bmk_rows"`
		Eval int `json:"eval_rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &ex), out)
	assert.Equal(t, 8, ex.Bmk, "agg_bmk rows")
	assert.Equal(t, 4, ex.Eval, "agg_eval_all rows")

	html := filepath.Join(t.TempDir(), "report.html")
	out, err = starter("report", "--sweep", id, "--results", results, "--out", html)
	require.NoError(t, err, out)
	page, err := os.ReadFile(html)
	require.NoError(t, err)
	assert.Contains(t, string(page), id)
	t.Logf("figures: sweep %s, %d points completed, %d agg_bmk rows, %d eval rows, report %d bytes",
		id, len(st.Points), ex.Bmk, ex.Eval, len(page))

	t.Run("tampered recipe fails before launch", func(t *testing.T) { tamperedRecipe(t, su) })
}

// tamperedRecipe plans the seed's aggregated points from a copy of the
// configs whose two agg recipes gained a setup script, so their identities
// name a recipe the workers' recipes (the image's configs/) do not resolve to. The
// workers must refuse them in Allocate, before any node is leased or any
// engine started, with the reason shown to the operator.
func tamperedRecipe(t *testing.T, su *stackUnderTest) {
	ctx := context.Background()
	tmp := t.TempDir()
	run(t, ctx, su.root, nil, "cp", "-r", "configs", tmp)
	agentic := filepath.Join(tmp, "configs", "recipes", "sglang", "deepseek-v4-0813", "gb200", "agentic")
	for _, f := range []string{"agg-gb200-tp8-c1-dspark6-hicache.yaml", "agg-gb200-tp8-c4-dspark6-hicache.yaml"} {
		fh, err := os.OpenFile(filepath.Join(agentic, f), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = fh.WriteString("setup_script: edited-after-the-workers-copy.sh\n")
		require.NoError(t, err)
		require.NoError(t, fh.Close())
	}
	sweep := filepath.Join(tmp, "configs", "sweeps", "tampered.yaml")
	seed, err := os.ReadFile(filepath.Join(tmp, "configs", "sweeps", "dsv4-gb200-agentx.yaml"))
	require.NoError(t, err)
	body := strings.Replace(string(seed), "name: dsv4-gb200-agentx", "name: dsv4-gb200-agentx-tampered", 1)
	body = strings.Replace(body, "  - dsv4-fp4-gb200-dynamo-sglang-agentic-mtp-disagg\n", "", 1)
	require.NoError(t, os.WriteFile(sweep, []byte(body), 0o644))

	const id = "compose-tampered"
	out, err := su.starter("sweep", "start", "--sweep", sweep, "--cluster", filepath.Join(tmp, "configs", "clusters", "local-sim.yaml"),
		"--id", id, "--fast-retries")
	require.NoError(t, err, out)

	type view struct {
		Points []struct {
			ID        string `json:"point_id"`
			Status    string `json:"status"`
			Stage     string `json:"stage"`
			LastError string `json:"last_error"`
			NodesHeld int    `json:"nodes_held"`
		} `json:"points"`
	}
	var st view
	require.Eventually(t, func() bool {
		out, err := su.starter("status", id, "--json")
		if err != nil || json.Unmarshal([]byte(out), &st) != nil || len(st.Points) != 2 {
			return false
		}
		for _, p := range st.Points {
			if p.Status != "awaiting-operator" {
				return false
			}
		}
		return true
	}, 3*time.Minute, 2*time.Second, "both tampered points wait for the operator")
	for _, p := range st.Points {
		assert.Equal(t, "allocate", p.Stage, p.ID)
		assert.Zero(t, p.NodesHeld, p.ID)
		assert.Contains(t, p.LastError, "the file changed since planning", p.ID)
		t.Logf("%s: %s", p.ID, p.LastError)
	}
	// The local backend's lease file: the tampered points hold no node.
	node, err := su.stack.ServiceContainer(ctx, "node")
	require.NoError(t, err)
	leases, err := docker(ctx, "exec", node.GetContainerID(), "cat", "/data/local-cluster/nodes.json")
	require.NoError(t, err)
	assert.NotContains(t, leases, id, "no allocation for a tampered point")
	out, err = su.starter("abort", "--sweep", id)
	require.NoError(t, err, out)
	out, err = su.starter("watch", id, "--interval", "1s")
	assert.Error(t, err, "a sweep of aborted points does not end completed:\n%s", lastLines(out, 6))
}

// stackUnderTest is a running compose stack (scripts/stack.sh's topology on
// the local images, with mTLS) and the host-side settings to reach it.
type stackUnderTest struct {
	root, certs, addr, results, password, project string
	stack                                         *compose.DockerCompose
	clientEnv                                     []string
	// starter runs the host's starter against the stack.
	starter    func(args ...string) (string, error)
	workerLogs func() string
	// down takes the stack down with its volumes (once; also at cleanup).
	down func(t *testing.T)
}

// upStack builds the images (content-cached), makes certificates and brings
// the stack up; extra overrides the compose environment. Cleanup takes it
// down with its volumes. It skips without a Docker engine or GSM8K.
func upStack(t *testing.T, ctx context.Context, name string, extra map[string]string) *stackUnderTest {
	t.Helper()
	gsm := gsm8kDir()
	if gsm == "" {
		missing(t, "GSM8K not available (no internet in the containers): set SWEEPFLOW_GSM8K_DIR to a directory with test.jsonl and train.jsonl")
	}
	root := repoRoot(t)

	// Images: built, or found unchanged (content-cached), by the project's script.
	bctx, cancel := context.WithTimeout(ctx, 60*time.Minute)
	defer cancel()
	t0 := time.Now()
	// SWEEPFLOW_WORKER_TAG builds and runs the worker image under another
	// tag than :local (a branch under test beside another checkout's stack).
	workerImage := "sweepflow-local/worker:local"
	if tag := os.Getenv("SWEEPFLOW_WORKER_TAG"); tag != "" {
		workerImage = "sweepflow-local/worker:" + tag
	}
	built := run(t, bctx, root, nil, "scripts/images.sh")
	t.Logf("scripts/images.sh (%s):\n%s", time.Since(t0).Round(time.Second), built)

	// Certificates and the ledger password, as scripts/stack.sh makes them.
	state := t.TempDir()
	run(t, ctx, root, []string{"SWEEPFLOW_STACK_DIR=" + state}, "scripts/stack.sh", "certs")
	certs := filepath.Join(state, "certs")
	pw, err := os.ReadFile(filepath.Join(state, "pg-password"))
	require.NoError(t, err)
	password := strings.TrimSpace(string(pw))

	bin := filepath.Join(t.TempDir(), "starter")
	run(t, ctx, root, nil, "go", "build", "-o", bin, "./starter")

	tport, uport, pport := freePort(t), freePort(t), freePort(t)
	env := map[string]string{
		"SWEEPFLOW_TEMPORAL_PORT": strconv.Itoa(tport),
		"SWEEPFLOW_UI_PORT":       strconv.Itoa(uport),
		"SWEEPFLOW_POSTGRES_PORT": strconv.Itoa(pport),
		"SWEEPFLOW_CERTS_DIR":     certs,
		"SWEEPFLOW_PG_PASSWORD":   password,
		"SWEEPFLOW_GSM8K_DIR":     gsm,
		"SWEEPFLOW_WORKER_IMAGE":  workerImage,
		// Short runs: 10 s perf dispatch, 200 GSM8K questions per eval.
		"SWEEPFLOW_PERF_DURATION": "10s",
		"SWEEPFLOW_EVAL_LIMIT":    "200",
	}
	for k, v := range extra {
		env[k] = v
	}
	files := []string{filepath.Join(root, "docker-compose.yml"),
		filepath.Join(root, "docker-compose.local.yml"), filepath.Join(root, "docker-compose.tls.yml")}
	if workerImage != "sweepflow-local/worker:local" {
		// docker-compose.local.yml names the :local worker image.
		f := filepath.Join(t.TempDir(), "worker-image.yml")
		require.NoError(t, os.WriteFile(f, []byte("services:\n  node: {image: \"${SWEEPFLOW_WORKER_IMAGE}\"}\n"+
			"  worker: {image: \"${SWEEPFLOW_WORKER_IMAGE}\"}\n  worker-2: {image: \"${SWEEPFLOW_WORKER_IMAGE}\"}\n"+
			"  temporal-create-namespace: {image: \"${SWEEPFLOW_WORKER_IMAGE}\"}\n"), 0o644))
		files = append(files, f)
	}
	project := fmt.Sprintf("sweepflow-%s-%d", name, time.Now().UnixNano())
	stack, err := compose.NewDockerComposeWith(
		compose.WithStackFiles(files...),
		compose.StackIdentifier(project),
	)
	require.NoError(t, err)
	var downOnce sync.Once
	down := func(t *testing.T) {
		downOnce.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			assert.NoError(t, stack.Down(ctx, compose.RemoveOrphans(true), compose.RemoveVolumes(true)))
		})
	}
	t.Cleanup(func() { down(t) })
	// Runs before down: on a failure, the state and last log lines of the
	// services the workers depend on (a hang after a restart shows there).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, svc := range []string{"temporal", "postgresql"} {
			c, err := stack.ServiceContainer(ctx, svc)
			if err != nil {
				t.Logf("--- %s: %v", svc, err)
				continue
			}
			if in, err := c.Inspect(ctx); err == nil && in.State != nil {
				t.Logf("--- %s: status %s, restarts %d, exit %d, started %s, error %q", svc, in.State.Status, in.RestartCount, in.State.ExitCode, in.State.StartedAt, in.State.Error)
			}
			if logs, err := containerLogs(ctx, c); err == nil {
				t.Logf("--- %s: last log lines\n%s", svc, lastLines(logs, 100))
			}
		}
	})
	stack.WithEnv(env).
		WaitForService("worker", wait.ForLog("worker ready").WithStartupTimeout(5*time.Minute)).
		WaitForService("worker-2", wait.ForLog("worker ready").WithStartupTimeout(5*time.Minute))
	upCtx, cancelUp := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelUp()
	t0 = time.Now()
	require.NoError(t, stack.Up(upCtx), "compose up")
	t.Logf("stack up in %s", time.Since(t0).Round(time.Second))

	workerLogs := func() string {
		var b strings.Builder
		for _, svc := range []string{"worker", "worker-2"} {
			c, err := stack.ServiceContainer(ctx, svc)
			if err != nil {
				continue
			}
			logs, err := containerLogs(ctx, c)
			if err != nil {
				continue
			}
			fmt.Fprintf(&b, "--- %s\n%s", svc, logs)
		}
		return b.String()
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tport))
	results := fmt.Sprintf("postgres://temporal:%s@127.0.0.1:%d/sweepflow?sslmode=disable", password, pport)
	clientEnv := []string{"TEMPORAL_ADDRESS=" + addr, "TEMPORAL_NAMESPACE=default", "TEMPORAL_TLS=true",
		"TEMPORAL_TLS_CLIENT_CERT_PATH=" + filepath.Join(certs, "client.pem"),
		"TEMPORAL_TLS_CLIENT_KEY_PATH=" + filepath.Join(certs, "client-key.pem"),
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + filepath.Join(certs, "ca.pem"),
		"TEMPORAL_TLS_SERVER_NAME=temporal", "SWEEPFLOW_RESULTS=" + results, "SWEEPFLOW_DATA_DIR=/data",
		"SWEEPFLOW_HOME=" + t.TempDir(), "SWEEPFLOW_UI_URL=http://127.0.0.1:" + strconv.Itoa(uport)}
	starter := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), clientEnv...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	return &stackUnderTest{root: root, certs: certs, addr: addr, results: results, password: password, project: project,
		stack: stack, clientEnv: clientEnv, starter: starter, workerLogs: workerLogs, down: down}
}

// containerLogs is everything c has logged so far.
func containerLogs(ctx context.Context, c *testcontainers.DockerContainer) (string, error) {
	r, err := c.Logs(ctx)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
