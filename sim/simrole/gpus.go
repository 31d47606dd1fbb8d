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
// (SLURM_PROCID of SLURM_STEP_NUM_TASKS, else SLURM_NTASKS); a step of one
// task is rank 0 of 1.
func mpiRank(getenv func(string) string) (rank, size int, err error) {
	size, rank = 1, 0
	for _, k := range []string{"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"} {
		if s := getenv(k); s != "" {
			if size, err = strconv.Atoi(s); err != nil || size < 1 {
				return 0, 0, fmt.Errorf("%s=%q: want a task count >= 1", k, s)
			}
			break
		}
	}
	if s := getenv("SLURM_PROCID"); s != "" {
		if rank, err = strconv.Atoi(s); err != nil || rank < 0 || rank >= size {
			return 0, 0, fmt.Errorf("SLURM_PROCID=%q: want a rank in [0, %d tasks)", s, size)
		}
	}
	return rank, size, nil
}

// firstHost is the first host of a Slurm hostlist ("gb200-[03-10]",
// "gb200-03,gb200-04", "gb200-[03,05-06]"): where rank 0 of a step runs.
func firstHost(list string) string {
	list = strings.TrimSpace(list)
	open := strings.IndexByte(list, '[')
	if comma := strings.IndexByte(list, ','); comma >= 0 && (open < 0 || comma < open) {
		return list[:comma]
	}
	if open < 0 {
		return list
	}
	inner := list[open+1:]
	end := strings.IndexAny(inner, ",-]")
	if end < 0 {
		return list
	}
	return list[:open] + inner[:end]
}
