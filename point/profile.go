package point

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Profile is the planned half of a point's measurement profile: what the
// plan knows about how the point's figures will be measured. The plan fills
// it in; `starter plan --json` prints its hash.
type Profile struct {
	Scenario    string `json:"scenario"` // fixed-seq-len | agentic-coding
	ISL         int    `json:"isl,omitempty"`
	OSL         int    `json:"osl,omitempty"`
	DurationSec int    `json:"duration_sec,omitempty"` // the row's perf duration
	Eval        bool   `json:"eval"`                   // the point runs GSM8K
	// EvalOnly: the point has no perf stage (InferenceX's EVAL_ONLY rows
	// of an evals-only or all-evals changelog entry); its eval is stamped
	// apart from a perf point's eval. Omitted when false, so the hashes of
	// perf points stay as they were.
	EvalOnly bool    `json:"eval_only,omitempty"`
	GoldenAL float64 `json:"golden_al,omitempty"` // synthetic acceptance for perf
	Thinking bool    `json:"thinking"`
	Backend  string  `json:"backend"`  // slurm | local
	Launcher string  `json:"launcher"` // srtctl | sbatch | local: the engine launch
}

// Hash is the planned profile's hash.
func (p Profile) Hash() string { return hashJSON("sweepflow-profile", p) }

// Measurement is the worker's half of the profile: the load and eval
// settings a worker measures with. The plan cannot know them (they are the
// worker's flags), so each stored result records them and reuse compares them.
type Measurement struct {
	Simulated bool   `json:"simulated"` // the engine is sweepflow's simulator
	Engine    string `json:"engine"`    // "simulator" or the launcher
	// Perf and warmup.
	PerfDurationMs  int64   `json:"perf_duration_ms"`
	Warmup          string  `json:"warmup"` // how warmup is sized ("2xconc")
	TimeScale       float64 `json:"time_scale"`
	Workload        string  `json:"workload"` // "random-isl-osl" or "agentx:<trace name>"
	SessionsPerConc int     `json:"sessions_per_conc,omitempty"`
	TurnsPerSession int     `json:"turns_per_session,omitempty"`
	Seed            int64   `json:"seed"`
	// PerfClient is what measured perf (PerfClientLoadgen or
	// PerfClientBenchmark): the two compute their figures differently.
	PerfClient string `json:"perf_client,omitempty"`
	// LoadgenVersion is loadgen.Version when sweepflow's load generator
	// measured (directly, or inside the simulated benchmark role).
	LoadgenVersion string `json:"loadgen_version,omitempty"`
	// RandomRangeRatio draws fixed-seq-len lengths from [r·L, L];
	// WarmupISL/OSL size the fixed-seq-len warmup requests.
	RandomRangeRatio float64 `json:"random_range_ratio,omitempty"`
	WarmupISL        int     `json:"warmup_isl,omitempty"`
	WarmupOSL        int     `json:"warmup_osl,omitempty"`
	// PointSeed seeds this point's prompts (fixed-seq-len) or its lanes'
	// start points and markers (agentic); TraceSeed generates the default
	// AgentX trace. Both clients sweepflow drives use them (the simulated
	// benchmark role gets them in its environment).
	PointSeed int64 `json:"point_seed,omitempty"`
	TraceSeed int64 `json:"trace_seed,omitempty"`
	// PrefixCache says how the server's prefix cache is treated before the
	// measurement: "flush" (emptied where the engine offers it).
	PrefixCache string `json:"prefix_cache,omitempty"`
	// PowerSource is where the perf window's power samples come from
	// (energy.SourceDCGM, SourceNVML, SourceSimulated; "" none): figures
	// of different sources are never compared.
	PowerSource string `json:"power_source,omitempty"`
	// Containers is the cluster profile's container remapping (recipe
	// container name -> the image srun runs): the same recipe on another
	// image measures another engine build.
	Containers map[string]string `json:"containers,omitempty"`
	// Eval.
	EvalMode        string  `json:"eval_mode,omitempty"`
	EvalLimit       int     `json:"eval_limit,omitempty"`
	EvalConcurrency int     `json:"eval_concurrency,omitempty"`
	EvalFloor       float64 `json:"eval_floor,omitempty"`
}

// Measured is the full profile of one stored output: the planned profile
// and the worker's measurement, restricted to what matters for the stage
// (a perf figure does not depend on the eval limit, nor an eval on the perf
// duration or the golden AL).
type Measured struct {
	Stage       string      `json:"stage"`
	Profile     Profile     `json:"profile"`
	Measurement Measurement `json:"measurement"`
}

// ForStage builds the full profile of a stage's output.
func ForStage(stage string, p Profile, m Measurement) Measured {
	switch stage {
	case StagePerf:
		m.EvalMode, m.EvalLimit, m.EvalConcurrency, m.EvalFloor = "", 0, 0, 0
		p.Eval = false
		if p.Scenario != "agentic-coding" {
			// A fixed-seq-len run is bounded by its requests: no duration
			// bears on its figures, so none may block a reuse.
			p.DurationSec, m.PerfDurationMs = 0, 0
		}
	case StageEval:
		// Evals run with real draft verification and their own request mix.
		p.GoldenAL, p.DurationSec, p.ISL, p.OSL = 0, 0, 0, 0
		m.PerfDurationMs, m.Warmup, m.Workload, m.SessionsPerConc, m.TurnsPerSession, m.Seed = 0, "", "", 0, 0, 0
		m.PerfClient, m.LoadgenVersion, m.RandomRangeRatio, m.WarmupISL, m.WarmupOSL = "", "", 0, 0, 0
		m.PointSeed, m.TraceSeed, m.PrefixCache, m.PowerSource = 0, 0, "", ""
		p.Eval = true
	}
	return Measured{Stage: stage, Profile: p, Measurement: m}
}

// Hash is the profile hash stored with the output and compared on reuse.
func (m Measured) Hash() string { return hashJSON("sweepflow-measured", m) }

func hashJSON(kind string, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("point: hashing %s: %v", kind, err)) // plain structs always marshal
	}
	sum := sha256.Sum256(append([]byte(kind+" "+hashVersion+"\n"), data...))
	return hex.EncodeToString(sum[:])
}

// Stamp is what the ledger stores about how an output came to be.
type Stamp struct {
	Identity    string `json:"identity"`
	ProfileHash string `json:"profile_hash"`
	Simulated   bool   `json:"simulated"`
	// Profile is the full profile, kept to say why a reuse was refused.
	Profile *Measured `json:"profile,omitempty"`
}

// CanReuse decides whether a stored output may stand in for the one a run
// needs. Reuse is exact: the identity and the profile hash must both match.
// Independently of the hashes, a simulated output never stands in for a
// real engine's. The reason says why not, for status and logs.
func CanReuse(stored, want Stamp) (bool, string) {
	switch {
	case stored.Simulated && !want.Simulated:
		return false, "stored output is simulated and this run measures a real engine"
	case stored.Identity != want.Identity:
		return false, "different point identity (deployment or concurrency changed)"
	case stored.ProfileHash != want.ProfileHash:
		if d := Diff(stored.Profile, want.Profile); d != "" {
			return false, "measurement profile differs: " + d
		}
		return false, "measurement profile differs"
	}
	return true, ""
}

// Diff lists the profile fields that differ ("time_scale 0.002 -> 0.01").
func Diff(a, b *Measured) string {
	if a == nil || b == nil {
		return ""
	}
	fa, fb := flatten(a), flatten(b)
	var keys []string
	for k := range fa {
		keys = append(keys, k)
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if !reflect.DeepEqual(fa[k], fb[k]) {
			out = append(out, fmt.Sprintf("%s %v -> %v", k, orNone(fa[k]), orNone(fb[k])))
		}
	}
	return strings.Join(out, ", ")
}

func orNone(v any) any {
	if v == nil {
		return "(none)"
	}
	return v
}

func flatten(m *Measured) map[string]any {
	out := map[string]any{}
	add := func(v any) {
		data, _ := json.Marshal(v)
		var kv map[string]any
		_ = json.Unmarshal(data, &kv)
		for k, x := range kv {
			out[k] = x
		}
	}
	add(m.Profile)
	add(m.Measurement)
	return out
}
