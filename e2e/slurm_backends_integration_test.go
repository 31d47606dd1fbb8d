package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/workflows"
)

// vllmAL is the golden AL of configs/dsv4-gb200-backends.yaml's vLLM rows
// (3 draft tokens, thinking on).
const vllmAL = 3.01

// TestSlurmBackendsSweep runs a Dynamo+TensorRT-LLM and a Dynamo+vLLM
// deployment (2 points each) and SGLang workers behind the SGLang router
// (1 point) of configs/sweeps/dsv4-gb200-backends.yaml through the real
// launcher on the emulated partition: bring-up, warmup,
// perf, eval (on a workers-only eval restart for vLLM, whose perf workers
// carried synthetic acceptance) and teardown. From the roles' own logs it checks that
// every process received its freshly rendered argv and env_to_set and that
// the launch wrote the rendered files (trtllm_config_<mode>.yaml); that
// perf-mode vLLM workers got InferenceX's synthetic acceptance inside their
// speculative-config and eval-mode ones did not; and afterwards that squeue
// holds no job of the sweep and no role process is left.
func TestSlurmBackendsSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the emulated Slurm partition and the Temporal dev server")
	}
	s := newSlurmIT(t)

	in := s.sweepOf(t, "../configs/sweeps/dsv4-gb200-backends.yaml", "slurm-backends")
	require.Len(t, in.Points, 5)
	s.runToCompletion(t, 10*time.Minute, in)
	// A vLLM point that ran every stage with its eval, for the replay set.
	for _, p := range in.Points {
		if p.Eval && strings.Contains(p.RecipePath, "/vllm/") {
			s.recordHistories(map[string]string{"point-vllm-eval.json": workflows.PointWorkflowID(in.SweepID, p.PointID)})
		}
	}

	benchEnv := func(framework string) map[string]string {
		return map[string]string{"MODEL_PREFIX": "dsv4", "FRAMEWORK": framework, "PRECISION": "fp4", "IS_MULTINODE": "true"}
	}
	trt := deploymentCheck{
		synthetic: func(t *testing.T, name string, argv []string, env map[string]string, _ bool) {
			require.Contains(t, strings.Join(argv, " "), "trtllm-llmapi-launch python3 -m dynamo.trtllm", name)
			for _, k := range synthKeys {
				assert.NotContains(t, env, k, name)
			}
		},
		benchEnv: benchEnv("dynamo-trt"),
		// TensorRT-LLM serves the checkpoint directory's name (srt-slurm
		// passes it as --served-model-name), so the clients ask for that.
		served: "DeepSeek-V4-Pro-0813",
	}
	vllm := deploymentCheck{
		al: vllmAL,
		synthetic: func(t *testing.T, name string, argv []string, _ map[string]string, perf bool) {
			spec := flagValue(argv, "--speculative-config")
			require.NotEmpty(t, spec, "%s: the worker got a speculative-config", name)
			var cfg map[string]any
			require.NoError(t, json.Unmarshal([]byte(spec), &cfg), "%s: %s", name, spec)
			if perf {
				assert.Equal(t, "synthetic", cfg["rejection_sample_method"], "%s: %s", name, spec)
				assert.Equal(t, vllmAL, cfg["synthetic_acceptance_length"], "%s: %s", name, spec)
				return
			}
			assert.NotContains(t, cfg, "rejection_sample_method", "%s: eval-mode workers verify real drafts", name)
			assert.NotContains(t, cfg, "synthetic_acceptance_length", "%s: eval-mode workers verify real drafts", name)
		},
		benchEnv: benchEnv("dynamo-vllm"),
	}
	router := deploymentCheck{
		synthetic: func(t *testing.T, name string, argv []string, _ map[string]string, _ bool) {
			require.Contains(t, strings.Join(argv, " "), "python3 -m sglang.launch_server", name)
		},
		benchEnv: benchEnv("dynamo-sglang"),
	}
	deployments, perf, eval := checkSweepBringUps(t, s.profile, in, func(p point.Spec) deploymentCheck {
		switch {
		case strings.Contains(p.RecipePath, "/trtllm/"):
			return trt
		case strings.Contains(p.RecipePath, "/vllm/"):
			return vllm
		}
		require.Contains(t, p.RecipePath, "-router-")
		return router
	})
	require.Equal(t, 3, deployments)
	require.Equal(t, 3, perf, "one perf bring-up per deployment")
	require.Equal(t, 1, eval, "one eval restart, for vLLM: TensorRT-LLM runs its eval on the perf bring-up (no synthetic acceptance to undo)")
}

// flagValue is the word after flag in argv, or "".
func flagValue(argv []string, flag string) string {
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == flag {
			return argv[i+1]
		}
	}
	return ""
}
