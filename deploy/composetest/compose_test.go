package composetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/compose"
	"github.com/testcontainers/testcontainers-go/wait"
	"gopkg.in/yaml.v3"
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

// workerDataDir is SWEEPFLOW_DATA_DIR of the compose file's worker: the
// starter on the host must plan with the same value, or the checkpoint
// paths in the plan would not exist inside the container.
func workerDataDir(t *testing.T, composeFile string) string {
	t.Helper()
	data, err := os.ReadFile(composeFile)
	require.NoError(t, err)
	var cf struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &cf))
	d := cf.Services["worker"].Environment["SWEEPFLOW_DATA_DIR"]
	require.NotEmpty(t, d, "%s: worker has no SWEEPFLOW_DATA_DIR", composeFile)
	return d
}

// missingImages lists the images of services without a build section that
// the local Docker engine does not have (${VAR:-default} tags at defaults).
func missingImages(t *testing.T, composeFile string) []string {
	t.Helper()
	data, err := os.ReadFile(composeFile)
	require.NoError(t, err)
	var cf struct {
		Services map[string]struct {
			Image string         `yaml:"image"`
			Build map[string]any `yaml:"build"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &cf))
	seen := map[string]bool{}
	var missing []string
	for _, svc := range cf.Services {
		if svc.Build != nil || svc.Image == "" {
			continue
		}
		img := os.Expand(svc.Image, func(v string) string {
			name, def, ok := strings.Cut(v, ":-")
			if val := os.Getenv(name); val != "" || !ok {
				return val
			}
			return def
		})
		if seen[img] {
			continue
		}
		seen[img] = true
		if exec.Command("docker", "image", "inspect", img).Run() != nil {
			missing = append(missing, img)
		}
	}
	sort.Strings(missing)
	return missing
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestComposeStackRunsOnePoint(t *testing.T) {
	ctx := context.Background()
	if err := dockerEngine(ctx); err != nil {
		t.Skipf("no Docker engine: %v", err)
	}
	root := repoRoot(t)
	composeFile := filepath.Join(root, "docker-compose.yml")
	if missing := missingImages(t, composeFile); len(missing) > 0 {
		// No registry here: an image that is not already loaded cannot be had.
		t.Skipf("compose stack test skipped: images not present locally and not buildable from this repository: %s", strings.Join(missing, ", "))
	}
	dataDir := workerDataDir(t, composeFile)

	// The host side of the test: the repository's starter.
	bin := filepath.Join(t.TempDir(), "starter")
	build := exec.Command("go", "build", "-o", bin, "./starter")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	env := map[string]string{
		// Free host ports, so a dev server on 7233 or anything on 8080 does
		// not get in the way.
		"SWEEPFLOW_TEMPORAL_PORT": strconv.Itoa(freePort(t)),
		"SWEEPFLOW_UI_PORT":       strconv.Itoa(freePort(t)),
	}
	if gsm := os.Getenv("SWEEPFLOW_GSM8K_DIR"); fileExists(filepath.Join(gsm, "test.jsonl")) {
		env["SWEEPFLOW_GSM8K_DIR"], _ = filepath.Abs(gsm) // else the worker downloads it
	}

	stack, err := compose.NewDockerComposeWith(
		compose.WithStackFiles(composeFile),
		compose.StackIdentifier(fmt.Sprintf("sweepflow-composetest-%d", time.Now().UnixNano())),
	)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		assert.NoError(t, stack.Down(ctx, compose.RemoveOrphans(true), compose.RemoveVolumes(true)))
	})
	stack.WithEnv(env).
		WaitForService("temporal", wait.ForListeningPort("7233/tcp").WithStartupTimeout(5*time.Minute)).
		WaitForService("worker", wait.ForLog("worker ready").WithStartupTimeout(5*time.Minute))

	upCtx, cancel := context.WithTimeout(ctx, 20*time.Minute) // includes building the worker image
	defer cancel()
	require.NoError(t, stack.Up(upCtx), "compose up")

	temporal, err := stack.ServiceContainer(ctx, "temporal")
	require.NoError(t, err)
	host, err := temporal.Host(ctx)
	require.NoError(t, err)
	port, err := temporal.MappedPort(ctx, "7233/tcp")
	require.NoError(t, err)
	addr := net.JoinHostPort(host, port.Port())

	workerLogs := func() string {
		w, err := stack.ServiceContainer(ctx, "worker")
		if err != nil {
			return err.Error()
		}
		r, err := w.Logs(ctx)
		if err != nil {
			return err.Error()
		}
		defer r.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, r)
		return b.String()
	}
	starter := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+addr, "TEMPORAL_NAMESPACE=default",
			"SWEEPFLOW_DATA_DIR="+dataDir, "SWEEPFLOW_UI_URL=http://127.0.0.1:"+env["SWEEPFLOW_UI_PORT"])
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	const id = "compose-test"
	out2, err := starter("sweep", "start", "--sweep", "deploy/composetest/testdata/one-point-sweep.yaml",
		"--id", id, "--fast-retries", "--wait")
	require.NoError(t, err, "sweep start:\n%s\nworker logs:\n%s", out2, workerLogs())
	t.Logf("sweep start:\n%s", out2)

	out2, err = starter("status", id, "--json")
	require.NoError(t, err, out2)
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
	require.NoError(t, json.Unmarshal([]byte(out2), &st), out2)
	assert.Equal(t, "completed", st.Workflow)
	require.Len(t, st.Points, 1)
	assert.Equal(t, "completed", st.Points[0].Status)
	require.NotNil(t, st.Points[0].Perf, out2)
	assert.True(t, st.Points[0].Perf.Simulated)
	assert.Greater(t, st.Points[0].Perf.OutputTputPerGPU, 0.0)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
