package failure

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Log tails as the engines and the kernel print them (written for these
// tests after the formats of PyTorch 2.x, NCCL 2.2x, the NVIDIA driver,
// argparse and SGLang's launcher).
var tails = []struct {
	name    string
	log     string
	class   Class
	excerpt string // a substring the excerpt must hold
}{
	{"cuda-oom", `[2026-01-12 03:14:07 DP3 TP3] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=21.43 GB
[2026-01-12 03:14:09 DP3 TP3] Capture cuda graph begin. This can take up to several minutes.
Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2412, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)
  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py", line 186, in capture_end
    super().capture_end()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 184.00 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 182.87 GiB memory in use.
[2026-01-12 03:14:10] Received sigquit from a child process. It usually means the child failed.
`, CUDAOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"},
	{"nccl", `gb200-03:2231:2231 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>
gb200-03:2231:2231 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.3<0>
gb200-03:2231:2598 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<41287> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.3 remoteGidsfe80::1
gb200-03:2231:2598 [0] NCCL INFO transport/net.cc:1298 -> 6
[rank3]:[E112 03:20:41.118000 2231 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.26.2
ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
`, NCCL, "ncclRemoteError: A call failed"},
	{"nccl-unhandled-system-error", `gb200-11:881:881 [2] NCCL INFO cudaDriverVersion 12080
gb200-11:881:1204 [2] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.12<35127> failed : Software caused connection abort
gb200-11:881:1204 [2] NCCL INFO misc/socket.cc:565 -> 2
torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3401, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2
`, NCCL, "unhandled system error"},
	{"gpu-xid", `[2026-01-12 04:02:11 DP0 TP0] Decode batch. #running-req: 256, #token: 812345, token usage: 0.71, gen throughput (token/s): 9821.44
[Mon Jan 12 04:02:13 2026] NVRM: Xid (PCI:0000:1b:00): 79, pid=48213, name=python3, GPU has fallen off the bus.
[Mon Jan 12 04:02:13 2026] NVRM: GPU 0000:1b:00.0: GPU has fallen off the bus.
RuntimeError: CUDA error: unspecified launch failure
`, GPUXid, "NVRM: Xid (PCI:0000:1b:00): 79"},
	{"gpu-off-the-bus", `[Mon Jan 12 04:02:13 2026] NVRM: GPU 0000:1b:00.0: GPU has fallen off the bus.
RuntimeError: CUDA error: unspecified launch failure
`, GPUXid, "GPU has fallen off the bus"},
	{"nvlink", `[2026-01-12 05:10:02 DP1 TP1] Prefill batch. #new-seq: 4, #new-token: 32768
[Mon Jan 12 05:10:04 2026] NVRM: knvlinkUpdatePostRxDetectLinkMask: Failed to update Rx Detect Link mask!
NVLink error: link 7 on GPU 2 is inactive (fatal)
RuntimeError: CUDA error: an illegal memory access was encountered
`, NVLink, "NVLink error: link 7"},
	{"refused-flag", `usage: python3 -m sglang.launch_server [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]
                                      [--host HOST] [--port PORT] [--tp-size TP_SIZE]
python3 -m sglang.launch_server: error: unrecognized arguments: --enable-dspark-hicache --foo
`, RefusedFlag, "error: unrecognized arguments: --enable-dspark-hicache --foo"},
	{"refused-flag-parser-error", `usage: sglang [-h] --model-path MODEL_PATH ...
sglang: error: --disaggregation-mode prefill needs --disaggregation-bootstrap-port
`, RefusedFlag, "sglang: error: --disaggregation-mode prefill"},
	{"python-error", `[2026-01-12 06:01:00] server_args=ServerArgs(model_path='/models/dsv4', tp_size=16, dp_size=16)
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 14, in <module>
    launch_server(server_args)
  File "/sgl-workspace/sglang/python/sglang/srt/server_args.py", line 903, in check_server_args
    raise ValueError(f"dp_size {self.dp_size} must divide tp_size {self.tp_size} when enable_dp_attention is off")
ValueError: dp_size 16 must divide tp_size 12 when enable_dp_attention is off
`, PythonError, "ValueError: dp_size 16 must divide tp_size 12"},
}

func TestBuiltinSignatures(t *testing.T) {
	tbl := Builtin()
	seen := map[int]bool{}
	for _, tc := range tails {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := tbl.Match(tc.log)
			if !ok {
				t.Fatalf("no class for the %s tail", tc.name)
			}
			if f.Class != tc.class {
				t.Fatalf("class %s (excerpt %q), want %s", f.Class, f.Excerpt, tc.class)
			}
			if !strings.Contains(f.Excerpt, tc.excerpt) {
				t.Fatalf("excerpt %q does not hold %q", f.Excerpt, tc.excerpt)
			}
			if len(f.Excerpt) > MaxExcerpt {
				t.Fatalf("excerpt is %d bytes, over %d", len(f.Excerpt), MaxExcerpt)
			}
		})
		// The signature that decided: the first one with a matching line.
		for i, s := range builtin {
			if _, ok := (Table{s}).Match(tc.log); ok {
				seen[i] = true
				break
			}
		}
	}
	for i, s := range builtin {
		if !seen[i] {
			t.Errorf("built-in signature %d (%s, %s) decides no log tail test", i, s.Class, s.Pattern)
		}
	}
}

// A healthy log (NCCL INFO lines, warnings that name no failure) matches
// nothing: a crash without a signature is engine-exit, not a guess.
func TestHealthyLogMatchesNothing(t *testing.T) {
	log := `gb200-01:100:100 [0] NCCL INFO NCCL version 2.26.2+cuda12.8
gb200-01:100:100 [0] NCCL INFO Channel 00/32 : 0 1 2 3
[2026-01-12 03:14:09] Capture cuda graph end. Time elapsed: 41.20 s. mem usage=3.11 GB. avail mem=18.32 GB.
[2026-01-12 03:14:10] The server is fired up and ready to roll!
WARNING: the tokenizer has no chat template; using the default
`
	if f, ok := Builtin().Match(log); ok {
		t.Fatalf("healthy log classified %s: %q", f.Class, f.Excerpt)
	}
}

// The last matching line is the evidence: a second OOM line later in the
// tail is what the excerpt quotes.
func TestMatchQuotesLastLine(t *testing.T) {
	log := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\nretrying\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB\n"
	f, _ := Builtin().Match(log)
	if !strings.Contains(f.Excerpt, "4.00 GiB") {
		t.Fatalf("excerpt %q, want the last OOM line", f.Excerpt)
	}
	// Only the tail is read: an OOM 300 lines before the end is history.
	old := "torch.OutOfMemoryError: CUDA out of memory.\n" + strings.Repeat("ok\n", 300)
	if f, ok := Builtin().Match(old); ok {
		t.Fatalf("a line outside the last %d classified the log: %s", TailLines, f.Class)
	}
}

func TestProfileSignatureComesFirst(t *testing.T) {
	s, err := NewSignature("disk-full", `No space left on device`, "gb200.yaml:12")
	if err != nil {
		t.Fatal(err)
	}
	log := "OSError: [Errno 28] No space left on device: '/tmp/torchinductor'\n"
	f, ok := Builtin().With(s).Match(log)
	if !ok || f.Class != "disk-full" {
		t.Fatalf("got %v %v, want disk-full ahead of python-error", f, ok)
	}
	if f, _ := Builtin().Match(log); f.Class != PythonError {
		t.Fatalf("without the profile: %s, want %s", f.Class, PythonError)
	}
	for _, bad := range []struct{ class, pattern, want string }{
		{"Disk Full", "x", "class"},
		{"disk-full", "(", "missing closing )"},
		{"disk-full", "", "must not be empty"},
		{"disk-full", "x*", "empty line"},
	} {
		if _, err := NewSignature(bad.class, bad.pattern, ""); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("NewSignature(%q, %q) = %v, want an error about %q", bad.class, bad.pattern, err, bad.want)
		}
	}
}

func TestWrapKeepsSentinelAndInnermostClass(t *testing.T) {
	sentinel := errors.New("allocation lost")
	err := Wrap(fmt.Errorf("%w: slurm job 12 is NODE_FAIL", sentinel), NodeFail, "slurm job 12 is NODE_FAIL")
	outer := Wrap(fmt.Errorf("perf: %w", err), Transient, "outer")
	if !errors.Is(outer, sentinel) {
		t.Fatal("wrapped error lost its sentinel")
	}
	f, ok := Of(outer)
	if !ok || f.Class != NodeFail || f.Excerpt != "slurm job 12 is NODE_FAIL" {
		t.Fatalf("Of = %+v %v, want the inner node-fail", f, ok)
	}
	if Wrap(nil, NodeFail, "x") != nil {
		t.Fatal("Wrap(nil) is not nil")
	}
	if got := Clip(strings.Repeat("é", 200)); len(got) > MaxExcerpt || !strings.HasSuffix(got, "...") {
		t.Fatalf("Clip: %d bytes %q", len(got), got[len(got)-5:])
	}
}
