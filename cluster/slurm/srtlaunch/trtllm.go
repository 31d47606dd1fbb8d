package srtlaunch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/sweepflow/sweepflow/config"
)

// TensorRT-LLM workers (srt-slurm backends/trtllm.py, v1.0.68): one srun
// per worker spanning its nodes, with PMIx and one task per GPU; the engine
// options go to /logs/trtllm_config_<mode>.yaml (yaml.safe_dump of the
// recipe's trtllm_config.<mode>), which dynamo.trtllm reads via
// --extra-engine-args.

// trtllmConfigFile is the file name srt-slurm writes a mode's engine options to.
func trtllmConfigFile(mode string) string { return "trtllm_config_" + mode + ".yaml" }

// trtllmCommand is the dynamo.trtllm argv of a worker.
func trtllmCommand(s *spec, mode, modelArg, modelName string) []string {
	var cmd []string
	numa := s.Resources.GPUType == "gb200" || s.Resources.GPUType == "gb300"
	if b := s.Engine.NUMAMemoryBind; b != nil {
		numa = *b
	}
	if numa && (mode == "prefill" || mode == "decode") {
		cmd = append(cmd, "numactl", "-m", "0,1")
	}
	cmd = append(cmd, "trtllm-llmapi-launch", "python3", "-m", "dynamo.trtllm", "--model-path", modelArg, "--served-model-name", modelName)
	if mode != "agg" {
		cmd = append(cmd, "--disaggregation-mode", mode)
	}
	cmd = append(cmd, "--extra-engine-args", "/logs/"+trtllmConfigFile(mode), "--request-plane", s.Dynamo.RequestPlane)
	if s.Engine.PublishEventsAndMetrics {
		cmd = append(cmd, "--publish-events-and-metrics")
	}
	return cmd
}

// eplbShmName stands in for srt-slurm's TRTLLM_EPLB_SHM_NAME, which is
// "moe_shared_" + uuid4().hex, random per worker. A random value cannot be
// rendered reproducibly, so ours has the same shape (32 lowercase hex
// digits) and is unique per job and worker; the reference tests normalise
// moe_shared_[0-9a-f]{32} on both sides.
func eplbShmName(jobID, logDir, mode string, index int) string {
	h := sha256.Sum256([]byte(jobID + "\x00" + logDir + "\x00" + mode + "\x00" + strconv.Itoa(index)))
	return "moe_shared_" + hex.EncodeToString(h[:16])
}

// trtllmWorker is one worker's srun (srt-slurm start_endpoint_worker): the
// leader's ports and log, every node of the worker, no recipe srun_options.
func trtllmWorker(s *spec, leader *workerProc, rest []*workerProc, ns *nodes, opt Options, modelArg, modelName string,
	env *config.Map, mounts *config.Map, preamble *string, exportEnv *config.Map) *Process {
	mode := leader.ep.mode
	var nodelist []string
	for _, wp := range rest {
		if wp.ep == leader.ep && indexOf(nodelist, wp.node) < 0 {
			nodelist = append(nodelist, wp.node)
		}
	}
	e := config.NewMap()
	e.Set("HEAD_NODE_IP", ns.addr[ns.head])
	e.Set("ETCD_ENDPOINTS", fmt.Sprintf("http://%s:%d", ns.infra, etcdPort))
	e.Set("NATS_SERVER", fmt.Sprintf("nats://%s:%d", ns.infra, natsPort))
	e.Set("DYN_SYSTEM_PORT", strconv.Itoa(leader.sysPort))
	e.Set("DYN_SKIP_SGLANG_LOG_FORMATTING", "1")
	if s.Dynamo.EventPlane != "" {
		e.Set("DYN_EVENT_PLANE", s.Dynamo.EventPlane)
	}
	e.Set("DYN_LOG", "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn")
	if me := s.modeEnv[mode]; me != nil {
		for _, k := range me.Keys {
			e.Set(k, pyStr(me.Vals[k])) // no {node} templating on this path
		}
	}
	e.Set("TRTLLM_EPLB_SHM_NAME", eplbShmName(opt.JobID, opt.Paths.LogDir, mode, leader.ep.index))
	for _, k := range env.Keys {
		e.Set(k, env.Vals[k])
	}
	if len(leader.gpus) < s.gpusPerNode {
		e.Set("CUDA_VISIBLE_DEVICES", joinInts(leader.gpus))
	}
	pmix := "pmix"
	return &Process{Role: Role(mode), Index: leader.ep.index, Command: trtllmCommand(s, mode, modelArg, modelName), Env: e,
		BashPreamble: preamble, Nodelist: nodelist,
		Output:         fmt.Sprintf("%s/%s_%s_w%d.out", opt.Paths.LogDir, leader.node, mode, leader.ep.index),
		ContainerImage: opt.Paths.Image, ContainerMounts: cloneMap(mounts), SrunOptions: config.NewMap(),
		SrunExportEnv: cloneMap(exportEnv), MPI: &pmix, wrap: true,
		ntasks: len(nodelist) * len(leader.gpus), oversubscribe: true, cpuBind: "verbose,none"}
}
