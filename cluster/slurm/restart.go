package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
)

// restartWorkers is the eval restart (issue 12: "eval restarts the workers
// without synthetic acceptance"): when the job already serves this recipe on
// these nodes and every infra, nginx and frontend step of that bring-up still
// runs, only the workers are replaced. The old workers are cancelled, the
// frontend must report their registrations gone (dynamo drops an instance
// when its etcd lease ends), then the newly rendered workers start and
// register with the same etcd, where the running frontends discover them.
// ok is false when there is nothing to reuse, or when the old registrations
// did not clear; the caller then does a full bring-up, which stops every
// step.
func (b *Backend) restartWorkers(ctx context.Context, alloc cluster.Allocation, spec cluster.ServeSpec) (cluster.Server, bool, error) {
	prevDir := latestServeDir(alloc.WorkDir)
	if prevDir == "" {
		return cluster.Server{}, false, nil
	}
	prev, err := readState(prevDir)
	// An SGLang router holds the worker URLs it was started with and keeps
	// counting them while they restart, and vllm serve is its own frontend,
	// so their deployments come up whole.
	if err != nil || prev.RecipePath != spec.RecipePath || prev.JobID != alloc.JobID || !slices.Equal(prev.Nodes, alloc.Nodes) || prev.URL == "" ||
		prev.Frontend == "sglang" || prev.Frontend == "vllm" {
		return cluster.Server{}, false, nil
	}
	running, err := b.steps(ctx, alloc, stepPrefix)
	if err != nil {
		return cluster.Server{}, false, err
	}
	have := map[string]bool{}
	for _, n := range running {
		have[n] = true
	}
	var keep []step
	oldWorkers := map[string]bool{}
	for _, s := range prev.Steps {
		if isWorker(s.Role) {
			oldWorkers[s.Name] = true
			continue
		}
		if !have[s.Name] {
			return cluster.Server{}, false, nil // a full bring-up replaces what died
		}
		keep = append(keep, s)
	}
	if len(keep) == 0 {
		return cluster.Server{}, false, nil
	}
	if err := b.stopSteps(ctx, alloc, benchPrefix); err != nil {
		return cluster.Server{}, false, err
	}
	if err := b.stopMatching(ctx, alloc, []string{stepPrefix}, func(n string) bool { return oldWorkers[n] }); err != nil {
		return cluster.Server{}, false, err
	}
	if err := b.waitUnregistered(ctx, prev.URL, time.Minute); err != nil {
		return cluster.Server{}, false, nil
	}
	dir, err := nextServeDir(alloc.WorkDir)
	if err != nil {
		return cluster.Server{}, false, err
	}
	addrs := nodeAddrs(ctx, alloc.Nodes)
	rec, rendered, err := b.render(ctx, alloc, spec, dir, addrs)
	if err != nil {
		return cluster.Server{}, false, err
	}
	procs := rendered.Processes
	st := launchState{Started: time.Now(), BudgetSec: healthBudget(rec.HealthCheck.Timeout(), spec), JobID: alloc.JobID, Nodes: alloc.Nodes,
		RecipePath: spec.RecipePath, SyntheticAL: spec.SyntheticAL, WorkersOnly: true, ReusedFrom: filepath.Base(prevDir), URL: prev.URL}
	st.Prefill, st.Decode = srtlaunch.Expected(procs)
	var workers []step
	for _, p := range procs {
		s, err := b.cfg.Launch.newStep(p)
		if err != nil {
			return cluster.Server{}, false, err
		}
		switch {
		case isWorker(string(p.Role)):
			workers = append(workers, s)
		case p.Role == srtlaunch.RoleBenchmark:
			bs := s
			st.Benchmark = &bs
		}
	}
	st.Steps = append(keep, workers...)
	// The new workers read their engine options from this directory's /logs.
	if err := writeFiles(dir, rendered.Files); err != nil {
		return cluster.Server{}, false, err
	}
	if err := writeJSON(filepath.Join(dir, "launch.json"), st); err != nil {
		return cluster.Server{}, false, err
	}
	exited := make(chan string, len(st.Steps))
	for _, s := range workers {
		if err := ctx.Err(); err != nil {
			return cluster.Server{}, false, err
		}
		if err := b.startStep(alloc, s, simEnv(s, spec), exited); err != nil {
			return cluster.Server{}, false, err
		}
	}
	srv := cluster.Server{URL: st.URL, Handle: filepath.Base(dir), Model: rendered.ServedModel}
	return srv, true, b.waitListed(ctx, alloc, dir, workers, exited)
}

// waitUnregistered waits until the frontend's /health lists no worker.
func (b *Backend) waitUnregistered(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		p, d, err := frontendWorkers(ctx, url, "dynamo")
		if err == nil && p == 0 && d == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d prefill and %d decode workers still registered", p, d)
			}
			return fmt.Errorf("frontend %s after %s: %v", url, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.cfg.Poll / 4):
		}
	}
}

// frontendWorkers reads the registered workers as srt-slurm does: a dynamo
// frontend's /health, an SGLang router's /workers (frontend "sglang"), or
// a direct vLLM server's /v1/models (frontend "vllm": its one aggregate
// worker is up once a model is listed, check_vllm_health).
func frontendWorkers(ctx context.Context, url, frontend string) (prefill, decode int, err error) {
	path := "/health"
	switch frontend {
	case "sglang":
		path = "/workers"
	case "vllm":
		path = "/v1/models"
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("frontend %s: HTTP %d", path, resp.StatusCode)
	}
	switch frontend {
	case "sglang":
		return srtlaunch.RouterWorkers(body)
	case "vllm":
		var models struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &models); err != nil {
			return 0, 0, fmt.Errorf("vllm /v1/models: %v", err)
		}
		return 0, min(len(models.Data), 1), nil
	}
	h, err := srtlaunch.ParseFrontendHealth(body)
	if err != nil {
		return 0, 0, err
	}
	p, d := h.Workers()
	return p, d, nil
}
