package simrole

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/internal/atomicfile"
)

// The simulated exporters' power follows load. Every worker process of a
// job posts, a few times a second, a card on the job's power board (a
// directory under the host's temp dir, shared by the emulated nodes, which
// all run on this host): its node, role and GPUs, and, when it runs an
// engine, how many requests the engine has in prefill and decoding. The
// dcgm-exporter of a node reads the board and gives each of its GPUs the
// power energy.SimulatedGB200 draws in the role the cards give that node,
// under the job's load: the same model the perf stage samples on a
// simulated cluster without telemetry. A GPU no card claims idles.

// powerCard is one worker process's card.
type powerCard struct {
	Node        string  `json:"node"`
	Role        string  `json:"role"` // energy.RolePrefill, RoleDecode, RoleAgg
	GPUs        int     `json:"gpus"` // on Node
	Prefilling  int64   `json:"prefilling"`
	Decoding    int64   `json:"decoding"`
	UpdatedUnix float64 `json:"updated_unix"`
}

// cardTTL: a card older than this is a process that is gone.
const cardTTL = 5 * time.Second

// powerBoard is the job's board directory ("" outside a Slurm job).
func powerBoard(getenv func(string) string) string {
	job := getenv("SLURM_JOB_ID")
	if job == "" {
		return ""
	}
	return filepath.Join(os.TempDir(), "sweepflow-sim-power", job)
}

// roleOf maps a worker's disaggregation mode to its GPU role.
func roleOf(mode string) string {
	switch mode {
	case "prefill":
		return energy.RolePrefill
	case "decode":
		return energy.RoleDecode
	}
	return energy.RoleAgg
}

// postPowerCard keeps this worker process's card on the board until ctx
// ends; load reports the engine's (nil or (0, 0) without one).
func postPowerCard(ctx context.Context, o Options, mode string, load func() (int64, int64)) {
	board := powerBoard(o.Getenv)
	if board == "" {
		return
	}
	node := o.Getenv("SLURMD_NODENAME")
	if node == "" {
		node, _ = os.Hostname()
	}
	_, gpus, err := stepGPUs(o.Getenv)
	if err != nil || os.MkdirAll(board, 0o755) != nil {
		return
	}
	path := filepath.Join(board, fmt.Sprintf("%s-%d.json", node, os.Getpid()))
	defer os.Remove(path)
	for {
		c := powerCard{Node: node, Role: roleOf(mode), GPUs: gpus, UpdatedUnix: float64(time.Now().UnixNano()) / 1e9}
		if load != nil {
			c.Prefilling, c.Decoding = load()
		}
		if data, err := json.Marshal(c); err == nil {
			_ = atomicfile.WriteFile(path, data)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// boardPower is the model's draw of each GPU of node under the job's load,
// from the board's live cards (nil without a board: every GPU idles).
func boardPower(board, node string, gpus int, now time.Time) []float64 {
	m := energy.SimulatedGB200
	out := make([]float64, gpus)
	for i := range out {
		out[i] = m.IdleW
	}
	if board == "" {
		return out
	}
	files, _ := filepath.Glob(filepath.Join(board, "*.json"))
	var load energy.Load
	roleGPUs := map[string]int{}
	nodeRole := ""
	for _, f := range files {
		data, err := os.ReadFile(f)
		var c powerCard
		if err != nil || json.Unmarshal(data, &c) != nil || now.Sub(time.Unix(0, int64(c.UpdatedUnix*1e9))) > cardTTL {
			continue
		}
		load.Prefilling += float64(c.Prefilling)
		load.Decoding += float64(c.Decoding)
		roleGPUs[c.Role] += c.GPUs
		if strings.EqualFold(c.Node, node) {
			nodeRole = c.Role
		}
	}
	if nodeRole == "" {
		return out
	}
	prefill, decode := roleGPUs[energy.RolePrefill], roleGPUs[energy.RoleDecode]+roleGPUs[energy.RoleAgg]
	w := m.Power(nodeRole, load, prefill, decode)
	for i := range out {
		out[i] = w
	}
	return out
}
