package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/chaos"
	"github.com/sweepflow/sweepflow/cluster/slurm/slurmemu"
	"github.com/sweepflow/sweepflow/failure"
	"github.com/sweepflow/sweepflow/internal/freeport"
	"github.com/sweepflow/sweepflow/internal/gsm8kfixture"
	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/point"
	"github.com/sweepflow/sweepflow/temporalx"
)

// chaosSeed is the CI chaos run's seed (TestSlurmChaosRun logs its faults).
const chaosSeed = 35

// TestSlurmChaosRun is issue 35's chaos run in CI: four seed points (c1,
// c4, c64, c128: 16 of the 18 nodes at once) on the emulated partition,
// started by `starter sweep start --fast-retries --chaos 35` as a user
// would, on the embedded dev server that `starter server start` runs and
// with the worker process the run may kill. The seed draws one fault of
// each kind: a node set DOWN during perf, an engine crash with its log
// tail, a bring-up hang past its cut health budget, perf streams cut, a
// worker SIGKILL and a server restart. The run ends with every point
// completed and its account says that the ledger's failed attempts are
// exactly the faults injected; the test checks the same from the ledger
// by itself, that every fault landed, that the node-minutes add up, and
// that no job is left in squeue.
func TestSlurmChaosRun(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the emulated Slurm partition and the Temporal dev server")
	}
	part := slurmemu.Start(t)
	slurmemu.RequireRoles(t)
	e := newEmbeddedITEnv(t)

	// A copy of the configs whose master config keeps four points.
	configs := filepath.Join(t.TempDir(), "configs")
	require.NoError(t, os.CopyFS(configs, os.DirFS("../configs")))
	keepConcs(t, filepath.Join(configs, "dsv4-gb200-agentx.yaml"), 1, 4, 64, 128)
	profile := filepath.Join(configs, "clusters", "slurm-emu.yaml")
	out, err := exec.Command(e.starterBin, "sim", "checkpoint", "--dir",
		e.home+"/slurm-emu/shared/models/DeepSeek-V4-Pro-0813", "--shards", "3", "--shard-mib", "1").CombinedOutput()
	require.NoError(t, err, string(out))

	// Every stage lasts at least 3 s, so the run finds the stage a worker
	// kill or server restart waits for running.
	worker := e.startWorkerProcess("worker.log", "--cluster", profile, "--perf-duration", "6s", "--sim-stage-time", "3s")
	pidFile := filepath.Join(e.home, "worker.pid")
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(worker.Process.Pid)), 0o644))
	t.Cleanup(func() {
		// The run started the worker again: stop the one running now.
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(string(b)); err == nil && pid != worker.Process.Pid {
				_ = syscall.Kill(pid, syscall.SIGTERM)
				for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
					time.Sleep(100 * time.Millisecond)
				}
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	t0 := time.Now()
	res, code := e.cli("sweep", "start", "--sweep", filepath.Join(configs, "sweeps", "dsv4-gb200-agentx.yaml"), "--cluster", profile,
		"--fast-retries", "--chaos", strconv.Itoa(chaosSeed), "--chaos-worker", pidFile, "--chaos-server", e.serverPidFile, "--json")
	took := time.Since(t0)
	var sum chaos.Summary
	require.NoError(t, json.Unmarshal([]byte(res), &sum), res)
	var text strings.Builder
	sum.WriteText(&text)
	t.Logf("chaos run in %s:\n%s", took.Round(time.Second), text.String())
	require.Equal(t, 0, code, "the chaos run's account:\n%s", text.String())
	assert.Empty(t, sum.Mismatches)
	assert.Equal(t, map[string]int{point.StatusCompleted: 4}, sum.Counts, "every point completed")

	// One of each kind, each landed.
	var kinds []chaos.Kind
	for _, f := range sum.Faults {
		kinds = append(kinds, f.Kind)
		assert.Empty(t, f.Missed, "%s landed", f.Fault)
	}
	assert.ElementsMatch(t, chaos.AllKinds, kinds)

	// The ledger, read here: every fault made its failed attempt with its
	// class, a kill or restart a lost one of its point and stage, and no
	// failed attempt is left unexplained.
	atts, err := e.ledger().Attempts(context.Background(), sum.SweepID)
	require.NoError(t, err)
	var failed []string
	for _, a := range atts {
		require.NotEqual(t, "running", a.Outcome, "every attempt ended: %+v", a)
		if a.Failed() {
			failed = append(failed, fmt.Sprintf("%s %s #%d %s", a.PointID, a.Stage, a.Attempt, a.Class))
		}
	}
	t.Logf("failed attempts in the ledger:\n  %s", strings.Join(failed, "\n  "))
	for _, f := range sum.Faults {
		want := fmt.Sprintf("%s %s #", f.Point, f.Stage)
		found := slices.ContainsFunc(failed, func(s string) bool { return strings.HasPrefix(s, want) && strings.HasSuffix(s, " "+string(f.Expect)) })
		overtaken := slices.ContainsFunc(sum.Notes, func(n string) bool { return strings.HasPrefix(n, f.Fault.String()+": overtaken") })
		assert.True(t, found || overtaken, "%s: a failed attempt of class %s", f.Fault, f.Expect)
	}
	for _, s := range failed {
		explained := false
		for _, f := range sum.Faults {
			if strings.HasPrefix(s, f.Point+" "+f.Stage+" #") || (strings.HasSuffix(s, " "+string(failure.LostWorker)) && len(f.Hit) > 0) {
				explained = true
			}
		}
		assert.True(t, explained, "failed attempt %s comes from a fault", s)
	}
	e.requireNodeHoursAddUp(sum.SweepID)
	require.Eventually(t, func() bool { return len(part.Squeue(t)) == 0 }, 30*time.Second, 200*time.Millisecond,
		"jobs left in squeue: %v", part.Squeue(t))
}

// newEmbeddedITEnv is newITEnv on the embedded dev server that `starter
// server start` runs (pid file serverPidFile), which a chaos run restarts.
func newEmbeddedITEnv(t *testing.T) *embeddedITEnv {
	wd, _ := os.Getwd()
	bin, err := temporalx.CLIPath(wd)
	if err != nil {
		prereq.Missingf(t, "no Temporal CLI (%v); scripts/install-temporal.sh installs it", err)
	}
	if _, _, err := temporalx.DevServerPath(wd); err != nil {
		prereq.Missingf(t, "no dev server binary (%v); scripts/install-temporal.sh installs it", err)
	}
	gsm := gsm8kfixture.Dir(t)
	home := t.TempDir()
	data := filepath.Join(home, "temporal")
	port, err := freeport.Loopback()
	require.NoError(t, err)
	ui, err := freeport.Loopback()
	require.NoError(t, err)
	starter := starterBinary(t)
	args := []string{"--data-dir", data, "--port", strconv.Itoa(port), "--ui-port", strconv.Itoa(ui)}
	out, err := exec.Command(starter, append([]string{"server", "start"}, args...)...).CombinedOutput()
	require.NoError(t, err, string(out))
	t.Cleanup(func() { _ = exec.Command(starter, append([]string{"server", "stop"}, args...)...).Run() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c, err := client.Dial(client.Options{HostPort: addr, Logger: temporalx.SDKLogger(zap.NewNop())})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &embeddedITEnv{itEnv: newITEnvOn(t, bin, c, addr, home, gsm), serverPidFile: filepath.Join(data, "temporal.pid")}
}

type embeddedITEnv struct {
	*itEnv
	serverPidFile string
}

// keepConcs rewrites an InferenceX master config to keep only the
// search-space entries of the concurrencies given.
func keepConcs(t *testing.T, path string, concs ...int) {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "search-space" && n.Content[i+1].Kind == yaml.SequenceNode {
					seq := n.Content[i+1]
					seq.Content = slices.DeleteFunc(seq.Content, func(entry *yaml.Node) bool {
						var e struct {
							Concs []int `yaml:"conc-list"`
						}
						require.NoError(t, entry.Decode(&e))
						return !slices.ContainsFunc(e.Concs, func(c int) bool { return slices.Contains(concs, c) })
					})
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	b, err := yaml.Marshal(&doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
