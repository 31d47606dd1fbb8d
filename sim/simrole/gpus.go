package simrole

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// moduleArgs finds `python... -m MODULE` in argv, after any launcher words
// (numactl -m 0,1, trtllm-llmapi-launch, nsys profile ...), and returns the
// option words after it.
func moduleArgs(argv []string, module string) ([]string, bool) {
	for i := 0; i+2 < len(argv); i++ {
		if strings.HasPrefix(path.Base(argv[i]), "python") && argv[i+1] == "-m" && argv[i+2] == module {
			return argv[i+3:], true
		}
	}
	return nil, false
}

// stepGPUs is what the srun step gave this process, as Slurm tells it: the
// step's nodes (SLURM_STEP_NUM_NODES, else SLURM_NNODES, else 1) and the
// GPUs per node (CUDA_VISIBLE_DEVICES's count when set, as srt-slurm sets
// it for a worker smaller than a node, else the simulated node's GPUs).
func stepGPUs(getenv func(string) string) (nodes, perNode int, err error) {
	nodes = 1
	for _, k := range []string{"SLURM_STEP_NUM_NODES", "SLURM_NNODES"} {
		if s := getenv(k); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return 0, 0, fmt.Errorf("%s=%q: want a node count >= 1", k, s)
			}
			nodes = n
			break
		}
	}
	gpn, err := simFloat(getenv, EnvGPUsPerNode, 4, 1)
	if err != nil {
		return 0, 0, err
	}
	perNode = int(gpn)
	if cvd := strings.TrimSpace(getenv("CUDA_VISIBLE_DEVICES")); cvd != "" {
		perNode = len(strings.Split(cvd, ","))
	}
	return nodes, perNode, nil
}

// mpiRank is this task's place in an srun step of several tasks
// (SLURM_PROCID of SLURM_NTASKS); a step of one task is rank 0 of 1.
func mpiRank(getenv func(string) string) (rank, size int, err error) {
	size, rank = 1, 0
	if s := getenv("SLURM_NTASKS"); s != "" {
		if size, err = strconv.Atoi(s); err != nil || size < 1 {
			return 0, 0, fmt.Errorf("SLURM_NTASKS=%q: want a task count >= 1", s)
		}
	}
	if s := getenv("SLURM_PROCID"); s != "" {
		if rank, err = strconv.Atoi(s); err != nil || rank < 0 || rank >= size {
			return 0, 0, fmt.Errorf("SLURM_PROCID=%q: want a rank in [0, SLURM_NTASKS=%d)", s, size)
		}
	}
	return rank, size, nil
}
