package point

import "encoding/json"

// Spec is one sweep point as it travels through the workflows and every
// stage activity: what to launch, at which concurrency, how to measure it.
// It is plain data (no secrets: tokens come from the worker's environment).
// Its JSON (snake_case) is recorded in workflow histories and stored with
// every stage output, so field tags never change; new fields are omitempty.
type Spec struct {
	SweepID string `json:"sweep_id"`
	// PointID is unique within a sweep: the exp-name plus the identity
	// (ID); it names the child workflow, the local job and scratch.
	PointID     string `json:"point_id"`
	ExpName     string `json:"exp_name,omitempty"`
	ConfigKey   string `json:"config_key"`
	Topology    string `json:"topology"`
	Conc        int    `json:"conc"`
	Nodes       int    `json:"nodes"`
	GPUs        int    `json:"gpus"`
	PrefillGPUs int    `json:"prefill_gpus"`
	DecodeGPUs  int    `json:"decode_gpus"`
	// Identity keys the ledger and reuse (Identity.String());
	// ProfileHash and Profile are the planned measurement profile.
	Identity    string  `json:"identity,omitempty"`
	ProfileHash string  `json:"profile_hash,omitempty"`
	Profile     Profile `json:"profile"`
	// DeploymentHash is the identity's deployment hash (Deployment.Hash):
	// the points that share it share one allocation and one bring-up.
	// Histories recorded before it existed leave it empty; Identity holds it
	// too.
	DeploymentHash string `json:"deployment_hash,omitempty"`
	Eval           bool   `json:"eval"`
	Model          string `json:"model"`
	ModelPrefix    string `json:"model_prefix"`
	Image          string `json:"image"`
	// Framework is the row's InferenceX framework (dynamo-sglang,
	// dynamo-trt, ...): with the image, the point's canary group
	// (CanaryKey). Histories recorded before it existed leave it empty.
	Framework  string `json:"framework,omitempty"`
	RecipePath string `json:"recipe_path"`
	// RecipeDigest is the sha256 of the recipe bytes the identity was
	// computed from; the worker launches only a recipe file that has them.
	RecipeDigest string `json:"recipe_sha256,omitempty"`
	// RecipeSets are the --set dotted.key=value overrides the plan applied
	// to the recipe (the identity hashes their effect); the worker applies
	// them again to launch what was planned.
	RecipeSets  []string        `json:"recipe_sets,omitempty"`
	Row         json.RawMessage `json:"row"`
	ISL         int             `json:"isl"`
	OSL         int             `json:"osl"`
	DurationSec int             `json:"duration_sec"`
	// NodeMinutes is the point's planned node-minutes on an allocation of
	// its own (plan.NodeMinuteTimes.PointAlone): what picks a canary and
	// what a point that a failed canary kept from starting did not spend.
	// Set only for sweeps that run canaries.
	NodeMinutes float64 `json:"node_minutes,omitempty"`
	// SyntheticAL is the golden acceptance length injected into the engine
	// for the perf stage only (0 means the engine's real acceptance).
	SyntheticAL float64 `json:"synthetic_al,omitempty"`
	// CheckpointSource is the checkpoint on the shared filesystem and
	// CheckpointPath the node-local path the engine loads; staging copies one
	// to the other on every node. Empty source: nothing to stage.
	CheckpointSource string `json:"checkpoint_source,omitempty"`
	CheckpointPath   string `json:"checkpoint_path,omitempty"`
	// Layout is the topology in the shorthand the simulator understands
	// ("2P1D DEP16/DEP32"); the JSON keeps its first name.
	Layout string `json:"deployment"`
	// Faults injected on purpose (chaos testing, demos of the operator gate).
	Faults []Fault `json:"faults,omitempty"`
	// BaselineKey is the point's identity apart from the image (see the
	// BaselineKey function), so a nightly on a new image still finds last
	// night's figures.
	BaselineKey string `json:"baseline_key,omitempty"`
	// WarmupSkipped is set by the point workflow on the perf and upload
	// inputs when an operator skipped the warmup stage: the figures were
	// measured on a cold server, and their profile says so.
	WarmupSkipped bool `json:"warmup_skipped,omitempty"`
	// RecipeConc is the concurrency the recipe's name claims it is sized
	// for (…-c1280-…); set for the points of a key with adaptive points,
	// which stay at or below it (InferenceX's recipe-row rule). 0: none.
	RecipeConc int `json:"recipe_conc,omitempty"`
	// Added marks a point an adaptive search added while its deployment's
	// server was up (nil: a planned point).
	Added *Added `json:"added,omitempty"`
}

// Fault makes a stage fail on purpose for its first Times attempts: with
// an InjectedFault error (--inject-fault), or, when Chaos names one, with
// a real-looking fault the stage's attempt carries out (a chaos run,
// package chaos; its values are ChaosCrash, ChaosHang and ChaosStreamCut).
type Fault struct {
	Stage string `json:"stage"`
	Times int    `json:"times"`
	Chaos string `json:"chaos,omitempty"`
}

// The chaos faults a stage attempt carries out on a simulated cluster.
const (
	// ChaosCrash + ":" + KIND: the bring-up's engine worker roles die
	// with the log tail a real engine prints for KIND (cuda-oom, nccl,
	// gpu-xid; the emulated partition's SWEEPFLOW_SIM_CRASH).
	ChaosCrash = "crash"
	// ChaosHang: the bring-up's workers never register and the health
	// budget, cut to a few seconds, runs out.
	ChaosHang = "hang"
	// ChaosStreamCut: perf's response streams are cut from half its
	// window on, as a dropped connection would.
	ChaosStreamCut = "stream-cut"
)

// Deployment is the point's deployment hash: its own field, or for a spec
// recorded before it carried the hash, the one inside its identity ("" when
// it has none).
func (p Spec) Deployment() string {
	if p.DeploymentHash != "" {
		return p.DeploymentHash
	}
	if id, err := Parse(p.Identity); err == nil {
		return id.DeploymentHash
	}
	return ""
}

// DeploymentKey is the deployment a point belongs to: its deployment hash,
// or its own ID when it has none (then it is alone).
func (p Spec) DeploymentKey() string {
	if d := p.Deployment(); d != "" {
		return d
	}
	return "point:" + p.PointID
}
