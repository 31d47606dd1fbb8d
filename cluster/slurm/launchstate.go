package slurm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
)

// launchState is what a bring-up leaves in its log directory for Health,
// RunBenchmark and a retried activity.
type launchState struct {
	Started time.Time `json:"started"`
	// What was rendered: the allocation and the synthetic acceptance (0:
	// the eval-mode set).
	JobID       string   `json:"job_id"`
	Nodes       []string `json:"nodes"`
	RecipePath  string   `json:"recipe_path"`
	SyntheticAL float64  `json:"synthetic_al"`
	// WorkersOnly: this bring-up replaced the workers of the previous one
	// (ReusedFrom), whose infra, nginx and frontends kept running.
	WorkersOnly bool    `json:"workers_only,omitempty"`
	ReusedFrom  string  `json:"reused_from,omitempty"`
	BudgetSec   float64 `json:"budget_sec"`
	URL         string  `json:"url"`
	Prefill     int     `json:"expected_prefill"`
	Decode      int     `json:"expected_decode"`
	// Frontend is the recipe's frontend.type: "sglang" routers report their
	// workers on /workers, dynamo frontends on /health.
	Frontend  string `json:"frontend,omitempty"`
	Steps     []step `json:"steps"`
	Benchmark *step  `json:"benchmark,omitempty"`
	// Telemetry are the DCGM exporter steps and the power collector.
	Telemetry []step `json:"telemetry,omitempty"`
}

// serveDir is where one bring-up's logs go (srt-slurm's LOG_DIR, /logs in
// the containers): serve-1, serve-2, ...
func nextServeDir(workDir string) (string, error) {
	entries, _ := os.ReadDir(workDir)
	n := 0
	for _, e := range entries {
		if v, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "serve-")); err == nil && v > n {
			n = v
		}
	}
	dir := filepath.Join(workDir, fmt.Sprintf("serve-%d", n+1))
	return dir, os.MkdirAll(dir, 0o755)
}

func stepLog(dir, name string) string {
	st, err := readState(dir)
	if err == nil {
		for _, s := range st.Steps {
			if s.Name == name {
				return s.Output
			}
		}
	}
	return filepath.Join(dir, "srun-"+strings.TrimPrefix(name, stepPrefix)+".log")
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readState(dir string) (*launchState, error) {
	data, err := os.ReadFile(filepath.Join(dir, "launch.json"))
	if err != nil {
		return nil, err
	}
	var st launchState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, "launch.json"), err)
	}
	return &st, nil
}

// writeFiles writes the files the render returned (nginx.conf, the
// TensorRT-LLM engine options, ...) into the bring-up's log directory,
// mounted at /logs, before any step starts: what runs is what was rendered.
func writeFiles(dir string, files map[string]string) error {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return fmt.Errorf("%w: rendered file name %q is not a plain file name", cluster.ErrBadConfig, name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// latestServeDir is the job's most recent bring-up directory ("" if none).
func latestServeDir(workDir string) string {
	entries, _ := os.ReadDir(workDir)
	n := 0
	for _, e := range entries {
		if v, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "serve-")); err == nil && v > n {
			n = v
		}
	}
	if n == 0 {
		return ""
	}
	return filepath.Join(workDir, fmt.Sprintf("serve-%d", n))
}
