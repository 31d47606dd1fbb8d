package simrole

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// EnvCrash makes every engine worker role die at start-up with the log tail
// a real engine prints for that failure (fault injection on the emulated
// partition: the failure classes' evidence path end to end). Its value is
// one of Crashes.
const EnvCrash = "SWEEPFLOW_SIM_CRASH"

// crashTails are what an SGLang worker on GB200 prints when it dies of each
// failure (written for the simulator after the formats of PyTorch 2.x,
// NCCL 2.26 and the NVIDIA driver). The role exits 1 after printing one.
var crashTails = map[string]string{
	"cuda-oom": `[sim DP0 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=21.43 GB
[sim DP0 TP0] Capture cuda graph begin. This can take up to several minutes.
Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 412, in capture
    graph.capture_end()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 184.00 GiB of which 1.12 GiB is free.
`,
	"nccl": `[sim DP0 TP0] Init torch distributed begin.
sim:2231:2598 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<41287> with status=12 opcode=0 len=0 vendor err 129 (Recv)
torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3401, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2
`,
	"gpu-xid": `[sim DP0 TP0] Load weight begin.
NVRM: Xid (PCI:0000:1b:00): 79, pid=48213, name=python3, GPU has fallen off the bus.
RuntimeError: CUDA error: unspecified launch failure
`,
}

// Crashes lists the values EnvCrash accepts.
func Crashes() []string {
	out := make([]string, 0, len(crashTails))
	for k := range crashTails {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// crash prints the tail of the named failure and returns the role's error.
func crash(w io.Writer, name string) error {
	tail, ok := crashTails[name]
	if !ok {
		return fmt.Errorf("%w: %s=%q: want one of %s", ErrUsage, EnvCrash, name, strings.Join(Crashes(), ", "))
	}
	if _, err := io.WriteString(w, tail); err != nil {
		return err
	}
	return fmt.Errorf("simulated %s crash (%s)", name, EnvCrash)
}
