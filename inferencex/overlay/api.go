// Package overlay composes the recipes root InferenceX's multinode
// launchers run srt-slurm in: the user's srt-slurm checkout with InferenceX's
// own recipes (benchmarks/multi_node/srt-slurm-recipes) laid over it, the
// directories each launcher copies to the places it copies them, and nothing
// else.
//
// Two layouts of an InferenceX checkout exist. Until PR #3086 the GB200 and
// GB300 launchers (runners/launch_gb200-nv.sh, launch_gb300-nv.sh) clone an
// srt-slurm ref per key family and `cp -rT` chosen subdirectories of
// InferenceX's tree into it (Branches holds those ladders). From PR #3086 on,
// srt-slurm is pinned as the submodule utils/srt-slurm and
// setup_srt_slurm() copies InferenceX's whole tree into recipes/ (linked
// again as benchmarks/multi_node/srt-slurm-recipes) and its configs/ into
// configs/, for every key.
//
// Compose writes one directory holding what any key's copies produce (a
// copied directory always lands at the same place), and Root.Check tells,
// per key, whether a recipe there is the one that key's launcher would run.
package overlay

// RecipesDir is InferenceX's recipe tree inside its checkout.
const RecipesDir = "benchmarks/multi_node/srt-slurm-recipes"

// SubmoduleDir is where InferenceX pins srt-slurm from PR #3086 on.
const SubmoduleDir = "utils/srt-slurm"

// Layout is how an InferenceX checkout lays its recipes over srt-slurm.
type Layout string

const (
	// LauncherCopies: each launcher copies chosen directories of RecipesDir
	// over an srt-slurm checkout of the key family's ref.
	LauncherCopies Layout = "launcher-copies"
	// PinnedTree: the whole RecipesDir under recipes/ of the pinned
	// srt-slurm submodule, for every key.
	PinnedTree Layout = "pinned-tree"
)

// Lane is what a launcher's checkout ladder reads from a matrix row
// (FRAMEWORK, MODEL_PREFIX, PRECISION, IS_AGENTIC, SPEC_DECODING).
type Lane struct {
	Framework    string
	ModelPrefix  string
	Precision    string
	SpecDecoding string
	Agentic      bool
}

// Copy is one `cp -rT`: InferenceX's RecipesDir/From onto To in the srt-slurm
// checkout.
type Copy struct{ From, To string }

// Branch is one arm of a launcher's srt-slurm checkout ladder.
type Branch struct {
	Launcher string // launcher name: runners/launch_<Launcher>.sh
	When     string // the arm's condition, as the launcher tests it
	match    func(Lane) bool
	// Ref is the srt-slurm ref the arm checks out; PowerRef the one it
	// checks out for a recipe with an enabled dcgm-power telemetry block
	// ("" when that arm does not switch).
	Ref, PowerRef string
	Copies        []Copy
	// Shell, when set, is the shell launcher the arm runs instead of an
	// srt-slurm recipe.
	Shell string
}

// Root is a recipes root composed from the user's checkouts.
type Root struct {
	Dir        string `json:"-"`
	Layout     Layout `json:"layout"`
	InferenceX string `json:"inferencex"`
	SrtSlurm   string `json:"srt-slurm"`
}
