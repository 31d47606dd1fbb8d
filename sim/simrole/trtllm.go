package simrole

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

const trtllmProg = "python3 -m dynamo.trtllm"

// TRTLLMArgs are the dynamo.trtllm flags and the TensorRT-LLM LLM API
// options (--extra-engine-args YAML) the simulated worker acts on.
type TRTLLMArgs struct {
	ModelPath, ServedModelName string
	Mode                       string // prefill_and_decode, prefill or decode
	ExtraEngineArgs            string // the container path as given
	// From the flags, overridden by the YAML as dynamo.trtllm does.
	TP, PP, EP  int
	AttentionDP bool
	MaxSeqLen   int
	// Speculative decoding: the decoding type and its draft length (MTP:
	// num_nextn_predict_layers; the others: max_draft_len).
	SpecType     string
	SpecDraftLen int
	Unknown      []string // flags the simulator does not read
	Ignored      []string // YAML keys the simulator does not read
}

// GPUs is the MPI world TensorRT-LLM needs: one rank per GPU, tp x pp.
func (a TRTLLMArgs) GPUs() int { return a.TP * a.PP }

// Component is what dynamo.trtllm registers as: srt-slurm counts a
// "prefill" component as prefill and "tensorrt_llm" as a decode (or
// aggregated) worker (srtctl/core/health.py check_dynamo_health).
func (a TRTLLMArgs) Component() string {
	if a.Mode == "prefill" {
		return "prefill"
	}
	return "tensorrt_llm"
}

var trtllmKnown = map[string]bool{
	"model-path": true, "served-model-name": true, "disaggregation-mode": true, "extra-engine-args": true,
	"tensor-parallel-size": true, "pipeline-parallel-size": true, "expert-parallel-size": true, "max-seq-len": true,
}

// trtllmRead are the LLM API options the simulator reads (validated even
// when not modelled, as TensorRT-LLM's own validation would refuse a
// malformed value).
var trtllmRead = map[string]bool{
	"tensor_parallel_size": true, "pipeline_parallel_size": true, "moe_expert_parallel_size": true,
	"enable_attention_dp": true, "max_seq_len": true, "max_batch_size": true, "max_num_tokens": true,
	"speculative_config": true,
}

// ParseTRTLLMArgs reads the rendered worker command (launcher words such as
// `numactl -m 0,1 trtllm-llmapi-launch` included) and the
// --extra-engine-args file it names (read through mounts), and applies the
// checks TensorRT-LLM makes before it starts. Errors are one line.
func ParseTRTLLMArgs(argv []string, mounts Mounts) (TRTLLMArgs, error) {
	a := TRTLLMArgs{Mode: "prefill_and_decode", TP: 1, PP: 1, EP: 1}
	usage := func(format string, args ...any) error {
		return fmt.Errorf("%s: error: "+format, append([]any{trtllmProg}, args...)...)
	}
	words, ok := moduleArgs(argv, "dynamo.trtllm")
	if !ok {
		return a, usage("no `python3 -m dynamo.trtllm` in the command %q", strings.Join(argv, " "))
	}
	fa, err := parseFlags(words)
	if err != nil {
		return a, usage("%v", err)
	}
	str, num := fa.setStr, fa.setInt
	str(&a.ModelPath, "model-path")
	str(&a.ServedModelName, "served-model-name")
	str(&a.Mode, "disaggregation-mode")
	str(&a.ExtraEngineArgs, "extra-engine-args")
	num(&a.TP, "tensor-parallel-size")
	num(&a.PP, "pipeline-parallel-size")
	num(&a.EP, "expert-parallel-size")
	num(&a.MaxSeqLen, "max-seq-len")
	if err := errors.Join(fa.errs...); err != nil {
		return a, usage("%v", err)
	}
	for _, n := range fa.names() {
		if !trtllmKnown[n] {
			a.Unknown = append(a.Unknown, n)
		}
	}
	switch a.Mode {
	case "prefill_and_decode", "prefill", "decode":
	default:
		return a, usage("argument --disaggregation-mode: invalid choice: '%s' (choose from 'prefill_and_decode', 'prefill', 'decode')", a.Mode)
	}
	if a.ExtraEngineArgs != "" {
		if err := a.readEngineArgs(mounts.Host(a.ExtraEngineArgs)); err != nil {
			return a, usage("%v", err)
		}
	}
	if err := a.check(); err != nil {
		return a, usage("%v", err)
	}
	return a, nil
}

// readEngineArgs reads the LLM API options file: a YAML mapping, as
// TensorRT-LLM's update_llm_args_with_extra_dict takes it (yaml.safe_load,
// then keyword arguments of the LLM).
func (a *TRTLLMArgs) readEngineArgs(host string) error {
	name, hostNote := a.ExtraEngineArgs, ""
	if host != name {
		hostNote = " (host " + host + ")"
	}
	loc := func(line int) string { return fmt.Sprintf("--extra-engine-args %s:%d%s", name, line, hostNote) }
	b, err := os.ReadFile(host)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--extra-engine-args %s%s: no such file", name, hostNote)
		}
		return fmt.Errorf("--extra-engine-args %s%s: %v", name, hostNote, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("--extra-engine-args %s%s: not valid YAML: %s", name, hostNote, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		got := "an empty file"
		line := 1
		if len(doc.Content) > 0 {
			got, line = yamlKind(doc.Content[0]), doc.Content[0].Line
		}
		return fmt.Errorf("%s: want a mapping of LLM API options, got %s", loc(line), got)
	}
	m := doc.Content[0]
	at := func(n *yaml.Node, key, want string) error {
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: %s: want %s, got %s", loc(n.Line), key, want, yamlKind(n))
		}
		return fmt.Errorf("%s: %s: want %s, got %q", loc(n.Line), key, want, n.Value)
	}
	posInt := func(n *yaml.Node, key string, dst *int) error {
		var v int
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil || v < 1 {
			return at(n, key, "an integer >= 1")
		}
		*dst = v
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i].Value, m.Content[i+1]
		var err error
		var unused int
		switch k {
		case "tensor_parallel_size":
			err = posInt(v, k, &a.TP)
		case "pipeline_parallel_size":
			err = posInt(v, k, &a.PP)
		case "moe_expert_parallel_size":
			err = posInt(v, k, &a.EP)
		case "max_seq_len":
			err = posInt(v, k, &a.MaxSeqLen)
		case "max_batch_size", "max_num_tokens":
			err = posInt(v, k, &unused)
		case "enable_attention_dp":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&a.AttentionDP) != nil {
				err = at(v, k, "true or false")
			}
		case "speculative_config":
			err = a.readSpec(v, func(n *yaml.Node, key, want string) error { return at(n, "speculative_config."+key, want) },
				func(n *yaml.Node, key, want string) error {
					return fmt.Errorf("%s: speculative_config.%s: missing, want %s", loc(n.Line), key, want)
				})
		default:
			a.Ignored = append(a.Ignored, k)
		}
		if err != nil {
			return err
		}
	}
	sort.Strings(a.Ignored)
	return nil
}

// readSpec reads speculative_config (null: no speculation). TensorRT-LLM
// picks the config class by decoding_type and refuses an unknown one; the
// simulator models the draft-chain types by their draft length.
func (a *TRTLLMArgs) readSpec(v *yaml.Node, at, missing func(*yaml.Node, string, string) error) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return at(v, "", "a mapping")
	}
	fields := map[string]*yaml.Node{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		fields[v.Content[i].Value] = v.Content[i+1]
	}
	dt := fields["decoding_type"]
	if dt == nil {
		return missing(v, "decoding_type", "a decoding type (MTP, Eagle, Eagle3, NGram, DraftTarget)")
	}
	a.SpecType = dt.Value
	lenKey := "max_draft_len"
	switch dt.Value {
	case "MTP":
		lenKey = "num_nextn_predict_layers"
	case "Eagle", "Eagle3", "NGram", "DraftTarget":
	default:
		return at(dt, "decoding_type", "one of MTP, Eagle, Eagle3, NGram, DraftTarget (the decoding types the simulator models)")
	}
	a.SpecDraftLen = 1
	if n := fields[lenKey]; n != nil {
		var d int
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&d) != nil || d < 1 {
			return at(n, lenKey, "an integer >= 1")
		}
		a.SpecDraftLen = d
	} else if lenKey == "max_draft_len" {
		return missing(v, lenKey, "the number of draft tokens per step")
	}
	return nil
}

func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("the scalar %q", n.Value)
	case yaml.MappingNode:
		return "a mapping"
	}
	return "an alias"
}

// check mirrors what TensorRT-LLM refuses. tensorrt_llm/mapping.py
// (Mapping.__init__) derives moe_tp_size = tp_size / moe_ep_size when only
// the expert parallelism is given and raises ValueError unless
// tp_size == moe_tp_size * moe_ep_size; attention DP spreads the batch over
// the tp ranks, so it needs no divisibility of its own.
func (a TRTLLMArgs) check() error {
	if a.TP < 1 || a.PP < 1 || a.EP < 1 {
		return fmt.Errorf("tensor_parallel_size, pipeline_parallel_size and moe_expert_parallel_size must be >= 1 (got %d, %d, %d)", a.TP, a.PP, a.EP)
	}
	if a.TP%a.EP != 0 {
		return fmt.Errorf("ValueError: tp_size must equal to moe_tp_size * moe_ep_size, but moe_expert_parallel_size %d does not divide tensor_parallel_size %d", a.EP, a.TP)
	}
	return nil
}

// Acceptance is the simulated engine's speculative acceptance length:
// the simulator's own draft chain over the configured draft length (MTP's
// num_nextn_predict_layers draft tokens plus the verified one), 1 without
// speculation. InferenceX has no synthetic-acceptance injector for
// TensorRT-LLM recipes.
func (a TRTLLMArgs) Acceptance() float64 {
	if a.SpecType == "" {
		return 1
	}
	return ownAcceptance(a.SpecDraftLen + 1)
}

func (a TRTLLMArgs) spec() workerSpec {
	mode := a.Mode
	if mode == "prefill_and_decode" {
		mode = "agg"
	}
	model := a.ServedModelName
	if model == "" {
		model = a.ModelPath
	}
	dp := 1
	if a.AttentionDP {
		dp = a.TP
	}
	return workerSpec{Model: model, Mode: mode, Component: a.Component(),
		GPUs: a.GPUs(), EP: a.EP, DP: dp, DPA: a.AttentionDP, NNodes: 1, ContextLength: a.MaxSeqLen, AL: a.Acceptance()}
}

// runTRTLLM runs one task of a TensorRT-LLM worker's srun step. srt-slurm
// starts a worker as one srun over all its nodes with one MPI task per GPU
// (--ntasks = GPUs, --mpi pmix); trtllm-llmapi-launch runs dynamo.trtllm on
// rank 0 and an MPI worker on the others. So rank 0 (SLURM_PROCID) is the
// simulated worker and the other ranks hold their place until rank 0 goes
// away. The world is the step's tasks when there are more tasks than nodes
// (one per GPU), else its nodes times the GPUs per node (the emulation may
// run one task per node, its nodes having one CPU each). It must be exactly
// tensor_parallel_size x pipeline_parallel_size ranks: TensorRT-LLM's MPI
// session runs one worker per rank of the mapping, and srt-slurm sizes the
// step from the recipe's GPUs, so a mismatch is a recipe whose YAML and
// resources disagree.
func runTRTLLM(ctx context.Context, argv []string, o Options, mounts Mounts) error {
	a, err := ParseTRTLLMArgs(argv, mounts)
	if err != nil {
		return err
	}
	rank, tasks, err := mpiRank(o.Getenv)
	if err != nil {
		return err
	}
	nodes, perNode, err := stepGPUs(o.Getenv)
	if err != nil {
		return err
	}
	world, how := nodes*perNode, fmt.Sprintf("%d node(s) x %d GPUs", nodes, perNode)
	if tasks > nodes {
		world, how = tasks, fmt.Sprintf("%d MPI tasks", tasks)
	}
	if world != a.GPUs() {
		return fmt.Errorf("%s: error: tensor_parallel_size %d x pipeline_parallel_size %d = %d ranks, but the worker got %d GPUs (%s)",
			trtllmProg, a.TP, a.PP, a.GPUs(), world, how)
	}
	if len(a.Unknown) > 0 {
		fmt.Fprintf(o.Stdout, "sweepflow-sim: accepted and ignored %d dynamo.trtllm flags: --%s\n", len(a.Unknown), strings.Join(a.Unknown, " --"))
	}
	if len(a.Ignored) > 0 {
		fmt.Fprintf(o.Stdout, "sweepflow-sim: accepted and ignored %d LLM API options: %s\n", len(a.Ignored), strings.Join(a.Ignored, " "))
	}
	if rank > 0 {
		return holdRank(ctx, o, rank, tasks)
	}
	s := a.spec()
	s.Host = o.BindHost
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED trtllm %s worker tp %d pp %d ep %d attention-dp %v on %d GPUs, speculative %s, acceptance length %.3g\n",
		s.Component, a.TP, a.PP, a.EP, a.AttentionDP, a.GPUs(), cmp.Or(a.SpecType, "off"), s.AL)
	return runSimWorker(ctx, s, o, mounts)
}

// holdRank is an MPI rank other than 0: it serves nothing and exits with
// an error once rank 0, which it watches on its system port
// (DYN_SYSTEM_PORT on the step's first node), stops answering after having
// answered, as an MPI world aborts when a rank dies.
func holdRank(ctx context.Context, o Options, rank, tasks int) error {
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED trtllm MPI rank %d/%d (rank 0 serves the worker)\n", rank, tasks)
	host, port := firstHost(o.Getenv("SLURM_STEP_NODELIST")), o.Getenv("DYN_SYSTEM_PORT")
	if host == "" || port == "" {
		<-ctx.Done()
		return nil
	}
	url := "http://" + net.JoinHostPort(host, port) + "/health"
	hc := &http.Client{Timeout: 2 * time.Second}
	seen, misses := false, 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(rankPoll):
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		switch {
		case err == nil:
			resp.Body.Close()
			if !seen {
				fmt.Fprintf(o.Stdout, "sweepflow-sim: MPI rank %d sees rank 0 at %s\n", rank, url)
			}
			seen, misses = true, 0
		case ctx.Err() != nil:
			return nil
		case seen:
			if misses++; misses >= 3 {
				return fmt.Errorf("MPI rank %d: rank 0 stopped answering at %s: %v", rank, url, err)
			}
		}
	}
}

// rankPoll is how often a held rank checks rank 0.
const rankPoll = 500 * time.Millisecond
