package slurm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/config"
)

// The launcher writes exactly the files the render returns into the log
// directory before it starts anything (rendered == launched).
func TestLaunchWritesRenderedFiles(t *testing.T) {
	rec, err := config.LoadRecipe(filepath.Join("..", "..", "configs"), seedRecipes+"disagg-gb200-1p1d-dep8-dep16-c64-dspark6-hicache.yaml")
	require.NoError(t, err)
	rendered, err := srtlaunch.Render(rec, srtlaunch.PlaceholderAllocation(rec, 6), srtlaunch.Options{
		Paths: srtlaunch.PlaceholderPaths("DeepSeek-V4-Pro-0813"), JobID: "4242"})
	require.NoError(t, err)
	require.Contains(t, rendered.Files, "nginx.conf", "nginx fronts the frontends of a 6-node layout")
	dir := t.TempDir()
	require.NoError(t, writeFiles(dir, rendered.Files))
	for name, body := range rendered.Files {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, body, string(data), name)
	}
	conf := rendered.Files["nginx.conf"]
	for i := 2; i <= 6; i++ {
		assert.Contains(t, conf, fmt.Sprintf("server 10.0.0.%d:8180;", i), "one upstream per frontend")
	}
	assert.NotContains(t, conf, "10.0.0.1:8180", "no frontend on the nginx node")
	assert.Error(t, writeFiles(t.TempDir(), map[string]string{"../x": ""}), "a file name cannot leave the log directory")
}

func TestHostPath(t *testing.T) {
	mounts := []kv{{"/shared/jobs/x/serve-1", "/logs"}, {"/nvme/%n/ckpt", "/model"}, {"/ws", "/infmax-workspace"}}
	p, ok := hostPath(mounts, "/logs/agentic", []string{"gb200-02"})
	assert.True(t, ok)
	assert.Equal(t, "/shared/jobs/x/serve-1/agentic", p)
	p, _ = hostPath(mounts, "/model", []string{"gb200-02"})
	assert.Equal(t, "/nvme/gb200-02/ckpt", p)
	_, ok = hostPath(mounts, "/elsewhere", nil)
	assert.False(t, ok)
}

// A recipe behind the SGLang router renders and launches: Health reads the
// router's /workers (a dynamo frontend's /health otherwise), as srt-slurm's
// check_sglang_router_health and check_dynamo_health do.
func TestRenderSGLangRouterAndReadItsWorkers(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("srtlaunch", "testdata"))
	require.NoError(t, err)
	b, err := New(Config{Partition: "p", SharedRoot: dir, NodeLocalRoot: dir, StarterBin: "/bin/true", RecipesRoot: root, Launch: Launch{SrtRoot: "x"}})
	require.NoError(t, err)
	spec := func(name string) cluster.ServeSpec {
		data, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		return cluster.ServeSpec{RecipePath: name, RecipeDigest: config.RecipeDigest(data)}
	}
	alloc := cluster.Allocation{JobID: "7", Nodes: []string{"gb200-01", "gb200-02"}, WorkDir: dir}
	_, routed, err := b.render(context.Background(), alloc, spec("sglang-router.yaml"), dir, []string{"10.0.0.1", "10.0.0.2"})
	require.NoError(t, err)
	assert.Equal(t, "sglang", routed.Frontend)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/workers":
			_, _ = w.Write([]byte(`{"workers":[],"stats":{"prefill_count":2,"decode_count":1,"regular_count":0}}`))
		case "/health":
			_, _ = w.Write([]byte(`{"status":"healthy","instances":[{"component":"prefill","endpoint":"generate"}]}`))
		case "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"M","object":"model"}]}`))
		}
	}))
	defer srv.Close()
	p, d, err := frontendWorkers(context.Background(), srv.URL, "sglang")
	require.NoError(t, err)
	assert.Equal(t, []int{2, 1}, []int{p, d}, "the router's /workers")
	p, d, err = frontendWorkers(context.Background(), srv.URL, "dynamo")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 0}, []int{p, d}, "dynamo's /health")
	p, d, err = frontendWorkers(context.Background(), srv.URL, "vllm")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, []int{p, d}, "vllm serve's /v1/models: its one aggregate worker serves a model")
	_, rendered, err := b.render(context.Background(), cluster.Allocation{JobID: "7", Nodes: []string{"gb200-01", "gb200-02", "gb200-03"}, WorkDir: dir},
		spec("trtllm-disagg.yaml"), dir, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"})
	require.NoError(t, err)
	assert.Contains(t, rendered.Files, "trtllm_config_decode.yaml")
}

// A recipe whose model.container the profile binds to the row's image runs
// the point's image, as InferenceX's launchers write dynamo-sglang into
// srtslurm.yaml for each key; other containers, and points without an
// image, keep the profile's entry.
func TestRowImageContainers(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("srtlaunch", "testdata"))
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "sglang-router.yaml"))
	require.NoError(t, err)
	rec, err := config.ParseRecipe("sglang-router.yaml", data, "")
	require.NoError(t, err)
	name := rec.Model.Container
	b, err := New(Config{Partition: "p", SharedRoot: dir, NodeLocalRoot: dir, StarterBin: "/bin/true", RecipesRoot: root,
		Launch: Launch{SrtRoot: "x", Runtime: config.RuntimePyxis, RowImageContainers: []string{name},
			Containers: map[string]string{name: "/sq/profile.sqsh", "lmsysorg/sglang:row": "/sq/row.sqsh"}}})
	require.NoError(t, err)
	alloc := cluster.Allocation{JobID: "7", Nodes: []string{"gb200-01", "gb200-02"}, WorkDir: dir}
	images := func(rowImage string) map[string]string {
		_, rendered, err := b.render(context.Background(), alloc,
			cluster.ServeSpec{RecipePath: "sglang-router.yaml", RecipeDigest: config.RecipeDigest(data), Image: rowImage}, dir, []string{"10.0.0.1", "10.0.0.2"})
		require.NoError(t, err)
		out := map[string]string{}
		for _, p := range rendered.Processes {
			s, err := b.cfg.Launch.newStep(p)
			require.NoError(t, err)
			out[string(p.Role)] = s.Image
		}
		return out
	}
	row, none := images("lmsysorg/sglang:row"), images("")
	workers := 0
	for role, img := range none {
		if img == "/sq/profile.sqsh" {
			workers++
			assert.Equal(t, "/sq/row.sqsh", row[role], "%s runs in the recipe's container, so the row's image", role)
		} else {
			assert.Equal(t, img, row[role], "%s has a container of its own", role)
		}
	}
	assert.Positive(t, workers, "without a row image the recipe's container resolves through the profile: %v", none)
}

// TestBringUpSimSettings: a bring-up's SWEEPFLOW_SIM_* settings reach its
// simulator roles only, and its health budget may only be cut.
func TestBringUpSimSettings(t *testing.T) {
	spec := cluster.ServeSpec{Env: map[string]string{"SWEEPFLOW_MODE": "perf", "SWEEPFLOW_SIM_CRASH": "cuda-oom"}}
	assert.Equal(t, []kv{{"SWEEPFLOW_SIM_CRASH", "cuda-oom"}}, simEnv(step{SimRole: "sglang-worker"}, spec))
	assert.Nil(t, simEnv(step{}, spec), "a real engine's step gets none")
	assert.Equal(t, 14400.0, healthBudget(4*time.Hour, cluster.ServeSpec{}))
	assert.Equal(t, 15.0, healthBudget(4*time.Hour, cluster.ServeSpec{HealthBudget: 15 * time.Second}))
	assert.Equal(t, 10.0, healthBudget(10*time.Second, cluster.ServeSpec{HealthBudget: time.Minute}), "never lengthened")
}
