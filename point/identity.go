// Package point is the one place that knows what a sweep point is: its
// identity (which deployment at which concurrency), its measurement profile
// (how a figure was measured), the stage chain with each stage's options,
// and the rules that decide when a stored output may stand in for a new one.
// Plans, workflows, activities, the ledger and the CLI all use it, so no two
// of them can disagree about which point a figure belongs to.
package point

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Deployment is what a server is launched from: the matrix row without
// concurrency and exp-name, the recipe (its root-relative reference and
// what it resolves to), the image, the model, the launcher version and the
// backend kind. Points of one deployment share an allocation and a bring-up.
type Deployment struct {
	Row string // canonical InferenceX row without conc and exp-name
	// BaselineRow is Row without the image too (the row names its image).
	BaselineRow string
	RecipeRef   string // root-relative CONFIG_FILE path, with ":selector" if any
	// Recipe is the resolved recipe (config.Recipe.Canonical), not the
	// file's bytes: a recipe and its srt-slurm schema-2 spelling, or a
	// comment edit, are one deployment.
	Recipe   []byte
	Image    string
	Model    string
	Launcher string // launcher version: a new launcher means new identities
	Backend  string // cluster backend kind: slurm, local
}

// hashVersion changes when the hash inputs change meaning; the deployment
// hash has its own (3: the recipe is its resolved form, not its bytes).
const (
	hashVersion           = "2"
	deploymentHashVersion = "3"
)

// Hash is the deployment hash: sha256 over every field, length-prefixed so
// no two different deployments concatenate alike. No absolute path goes in,
// so the same sweep hashes the same on every machine.
func (d Deployment) Hash() string { return d.hash("sweepflow-deployment", true) }

// BaselineHash is the deployment hash without the image: a nightly that
// picks up a new image still finds last night's figures.
func (d Deployment) BaselineHash() string { return d.hash("sweepflow-baseline", false) }

func (d Deployment) hash(kind string, withImage bool) string {
	h := sha256.New()
	part := func(name string, data []byte) {
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
		h.Write([]byte{'\n'})
	}
	part(kind, []byte(deploymentHashVersion))
	if withImage {
		part("row", []byte(d.Row))
	} else {
		part("row", []byte(d.BaselineRow))
	}
	part("recipe-path", []byte(d.RecipeRef))
	part("recipe", d.Recipe)
	if withImage {
		part("image", []byte(d.Image))
	}
	part("model", []byte(d.Model))
	part("launcher", []byte(d.Launcher))
	part("backend", []byte(d.Backend))
	return hex.EncodeToString(h.Sum(nil))
}

// Identity is a point's identity: its deployment hash plus the concurrency.
// It keys workflow IDs, ledger rows, reuse and baselines; two points of a
// plan never share one.
type Identity struct {
	DeploymentHash string `json:"deployment"`
	Conc           int    `json:"conc"`
}

// New returns the identity of deployment d at concurrency conc.
func New(d Deployment, conc int) Identity { return Identity{DeploymentHash: d.Hash(), Conc: conc} }

// String is the identity's ledger form: "<deployment hash>-c<conc>".
func (id Identity) String() string {
	if id.DeploymentHash == "" {
		return ""
	}
	return id.DeploymentHash + "-c" + strconv.Itoa(id.Conc)
}

// Short is a readable prefix for IDs and tables: 8 hex digits of the
// deployment hash and the concurrency.
func (id Identity) Short() string {
	return id.DeploymentHash[:min(8, len(id.DeploymentHash))] + "-c" + strconv.Itoa(id.Conc)
}

// Parse reads an identity's String form.
func Parse(s string) (Identity, error) {
	i := strings.LastIndex(s, "-c")
	if i <= 0 {
		return Identity{}, fmt.Errorf("point identity %q: want <deployment hash>-c<conc>", s)
	}
	conc, err := strconv.Atoi(s[i+2:])
	if err != nil || conc < 0 {
		return Identity{}, fmt.Errorf("point identity %q: bad concurrency", s)
	}
	return Identity{DeploymentHash: s[:i], Conc: conc}, nil
}

// BaselineKey is "the same point apart from the image": what nightly
// regressions and pinned baselines compare across.
func BaselineKey(d Deployment, conc int) string {
	return d.BaselineHash()[:32] + "-c" + strconv.Itoa(conc)
}

// ID is a point's ID within a sweep (and so its child workflow ID, local
// job name and scratch directory): the human exp-name plus the identity.
// Exp-names alone collide: a fixed-seq-len row uses "<prefix>_1k1k" for
// every concurrency and every topology of a config key.
func ID(expName string, id Identity) string {
	return expName + "_" + id.Short()
}
