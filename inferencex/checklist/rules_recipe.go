package checklist

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sweepflow/sweepflow/config"
	"github.com/sweepflow/sweepflow/config/strictyaml"
	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
	"github.com/sweepflow/sweepflow/inferencex/matrix"
)

// --- arch-override (check 8) ---

var (
	overrideKeyRe = regexp.MustCompile(`^-{0,2}(hf[-_]overrides|json[-_]model[-_]override[-_]args|hf[-_]config[-_]overrides)$`)
	overrideArgRe = regexp.MustCompile(`--(hf-overrides|json-model-override-args)[= ]+('[^']*'|"[^"]*"|\S+)`)
	// Keys whose override removes computation: fewer layers, experts or
	// routed/indexed tokens than the checkpoint's config.
	trimKeyRe    = regexp.MustCompile(`(?i)^(num[-_]hidden[-_]layers|num[-_]layers|n[-_]layers|n[-_]routed[-_]experts|num[-_]experts|num[-_]local[-_]experts|n[-_]shared[-_]experts|num[-_]experts[-_]per[-_]tok|moe[-_]topk|index[-_]topk|first[-_]k[-_]dense[-_]replace)$`)
	configEditRe = regexp.MustCompile(`\b(sed|jq|yq)\b[^\n]*config\.json`)
)

// nativeOverrideKeys change no architecture FLOPs: context extension that
// the model's config supports natively.
var nativeOverrideKeys = []string{"max_position_embeddings", "rope_scaling", "rope_theta", "max_model_len"}

// overrideOK reports whether an override value only sets native keys.
func overrideOK(value string) bool {
	v := strings.Trim(strings.TrimSpace(value), `'"`)
	var m map[string]any
	if json.Unmarshal([]byte(v), &m) != nil || len(m) == 0 {
		return false
	}
	for k := range m {
		if !slices.Contains(nativeOverrideKeys, k) {
			return false
		}
	}
	return true
}

const archWant = "the checkpoint's native architecture (no override that removes layers, experts or other FLOPs)"

func (c *checker) rowOverrides(row *matrix.Row) {
	for _, s := range settings(row) {
		for _, m := range overrideArgRe.FindAllStringSubmatch(s.Raw, -1) {
			if !overrideOK(m[2]) {
				c.add(Finding{Rule: RuleArchOverride, Pos: s.Pos, Field: s.Field, ConfigKey: row.ConfigKey, Got: m[0], Want: archWant})
			}
		}
		if overrideKeyRe.MatchString(s.Key) && !overrideOK(s.Value) {
			c.add(Finding{Rule: RuleArchOverride, Pos: s.Pos, Field: s.Field, ConfigKey: row.ConfigKey, Got: s.Raw, Want: archWant})
		}
		if configEditRe.MatchString(s.Raw) {
			c.add(Finding{Rule: RuleArchOverride, Pos: s.Pos, Field: s.Field, ConfigKey: row.ConfigKey, Got: s.Raw, Want: archWant})
		}
	}
}

func (c *checker) recipeOverrides(rv *recipeView) {
	for _, sc := range rv.Scalars() {
		got := ""
		switch {
		case overrideKeyRe.MatchString(sc.Key) && !overrideOK(sc.Value):
			got = sc.Key + ": " + sc.Value
		case trimKeyRe.MatchString(sc.Key) && sc.Engine:
			got = sc.Key + ": " + sc.Value
		case configEditRe.MatchString(sc.Value):
			got = sc.Value
		default:
			for _, m := range overrideArgRe.FindAllStringSubmatch(sc.Value, -1) {
				if !overrideOK(m[2]) {
					got = m[0]
				}
			}
		}
		if got != "" {
			c.add(Finding{Rule: RuleArchOverride, Pos: sc.Pos, Field: sc.Path, Got: got, Want: archWant})
		}
	}
}

// --- engine-patch (check 10) ---

var patchRes = []*regexp.Regexp{
	regexp.MustCompile(`\bgit\s+(apply|am|cherry-pick)\b`),
	regexp.MustCompile(`(^|[\s;&|])patch\s+(-p\d|<|--)`),
	regexp.MustCompile(`\S+\.(patch|diff)\b`),
	regexp.MustCompile(`\bsed\s+-i\b.*(site-packages|dist-packages|sgl-workspace|sglang|vllm|tensorrt_llm)`),
	regexp.MustCompile(`(site-packages|dist-packages|/sgl-workspace/sglang)`),
	regexp.MustCompile(`importlib\.util\.find_spec|sitecustomize`),
	regexp.MustCompile(`\bpip3?\s+install\b.*\b(sglang|vllm|tensorrt[-_]llm|flashinfer|sgl[-_]kernel|deep[-_]gemm|deep[-_]?ep|torch)\b`),
	regexp.MustCompile(`\bpip3?\s+install\b.*git\+\S*(sglang|vllm|tensorrt)`),
}

// patchKeyRe: recipe keys that apply patches (not "dispatch" and friends).
var patchKeyRe = regexp.MustCompile(`(?i)(^|[-_])(patch|patches|patch[-_]files?|patch[-_]dir)$`)

func patchLike(s string) bool {
	for _, re := range patchRes {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

const patchWant = "the pinned image as shipped (no patch; a waiver docs/waiver/<PR>.md otherwise)"

func (c *checker) enginePatches(rv *recipeView) {
	if rv.SetupScript != "" {
		c.setupScript(rv, rv.SetupScript)
	}
	for _, sc := range rv.Scalars() {
		switch {
		case sc.Key == "setup-script":
			c.setupScript(rv, sc.Value)
		case sc.Path == sc.Key && sc.Value == rv.SetupScript:
			// the top-level setup script's own name, scanned above
		case patchKeyRe.MatchString(sc.Key):
			c.add(Finding{Rule: RuleEnginePatch, Pos: sc.Pos, Field: sc.Path, Got: sc.Key + ": " + sc.Value, Want: patchWant})
		case patchLike(sc.Value):
			c.add(Finding{Rule: RuleEnginePatch, Pos: sc.Pos, Field: sc.Path, Got: oneLineOf(sc.Value), Want: patchWant})
		}
	}
}

// setupScript scans the script a recipe runs before the engine starts, found
// next to the recipe or in the recipes root's configs/ (srt-slurm's layout).
func (c *checker) setupScript(rv *recipeView, script string) {
	name := strings.TrimSpace(script)
	var file string
	for _, dir := range []string{filepath.Dir(rv.File), c.opts.RecipesRoot, filepath.Join(c.opts.RecipesRoot, "configs"), filepath.Join(c.opts.RecipesRoot, "scripts")} {
		if p := filepath.Join(dir, name); exists(p) {
			file = p
			break
		}
	}
	if file == "" {
		c.note("%s: setup_script %s not found next to the recipe or in the recipes root; %s did not read it", rv.Display, name, RuleEnginePatch)
		return
	}
	f, err := os.Open(file)
	if err != nil {
		c.note("%s: %v", rv.Display, err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if patchLike(t) {
			c.add(Finding{Rule: RuleEnginePatch, Pos: strictyaml.Pos{File: strictyaml.DisplayPath(file), Line: line}, Field: "setup_script", Got: t, Want: patchWant})
		}
	}
}

func oneLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// --- recipe-row ---

var concClaimRe = regexp.MustCompile(`(?:^|[-_])c(\d+)(?:[-_.]|$)`)

// ClaimedConc is the concurrency a recipe claims in its name (its name:
// field, else its file name: …-c128-…), 0 if none: the top concurrency of
// the row that uses it. An adaptive point stays at or below it.
func ClaimedConc(r *config.Recipe) int {
	return claimedConc(r.Name, strings.TrimSuffix(path.Base(r.Path), path.Ext(r.Path)))
}

// claimedConc is the concurrency the first name that claims one claims.
func claimedConc(names ...string) int {
	for _, n := range names {
		if m := concClaimRe.FindStringSubmatch(n); m != nil {
			v, _ := strconv.Atoi(m[1])
			return v
		}
	}
	return 0
}

func (c *checker) recipeRow(row *matrix.Row, rv *recipeView) {
	s, e := row.Search, row.Entry
	if s.Prefill == nil || s.Decode == nil {
		return
	}
	res := rv.Resources
	fail := func(w *ixconfig.Worker, key, got, want string, at *strictyaml.Pos) {
		pos, field := s.Pos, s.Path
		if w != nil {
			pos, field = w.FieldPos(key), w.Path+"."+key
		}
		where := rv.Display
		if at != nil {
			where = at.String()
		} else if res.Pos.Line > 0 {
			where = res.Pos.String()
		}
		c.add(Finding{Rule: RuleRecipeRow, Pos: pos, Field: field, ConfigKey: row.ConfigKey, Got: got, Want: want + " (recipe " + where + ")"})
	}
	itoa := strconv.Itoa
	if !res.Disaggregated {
		if s.Decode.NumWorker != 0 {
			fail(s.Decode, "num-worker", itoa(s.Decode.NumWorker), "0: the recipe is aggregated", nil)
		}
		if w := rv.Roles.Agg.NumWorkers(); s.Prefill.NumWorker != w {
			fail(s.Prefill, "num-worker", itoa(s.Prefill.NumWorker), itoa(w)+" aggregated worker(s)", nil)
		}
	} else {
		pw, dw := rv.Roles.Prefill.Workers, rv.Roles.Decode.Workers
		if s.Decode.NumWorker == 0 {
			fail(s.Decode, "num-worker", "0 (aggregated)", itoa(dw)+" decode worker(s): the recipe is disaggregated", nil)
		} else if s.Decode.NumWorker != dw {
			fail(s.Decode, "num-worker", itoa(s.Decode.NumWorker), itoa(dw)+" decode worker(s)", nil)
		}
		if s.Prefill.NumWorker != pw {
			fail(s.Prefill, "num-worker", itoa(s.Prefill.NumWorker), itoa(pw)+" prefill worker(s)", nil)
		}
	}
	gpn := 0
	if c.runners != nil {
		if hw := c.runners.Hardware[e.Runner]; hw != nil {
			gpn = hw.GPUsPerNode
		}
	}
	if gpn > 0 && res.GPUsPerNode > 0 && gpn != res.GPUsPerNode {
		c.add(Finding{Rule: RuleRecipeRow, Pos: e.FieldPos("runner"), Field: e.Key + ".runner", ConfigKey: row.ConfigKey,
			Got:  fmt.Sprintf("%s: %d GPUs per node (runners hardware)", e.Runner, gpn),
			Want: fmt.Sprintf("%d GPUs per node (recipe %s resources.gpus_per_node)", res.GPUsPerNode, res.Pos)})
	}
	if gpn == 0 {
		gpn = res.GPUsPerNode
	}
	if fp, err := rv.Footprint(gpn); err != nil {
		c.add(Finding{Rule: RuleRecipeRow, Pos: s.Pos, Field: s.Path, ConfigKey: row.ConfigKey, Got: err.Error(), Want: "a recipe whose resources fit its nodes"})
	} else {
		gpus := func(w *ixconfig.Worker) int { return w.TP * w.PP * w.PCPSize }
		if gpus(s.Prefill) != fp.GPUsPerPrefill {
			fail(s.Prefill, "tp", fmt.Sprintf("%d GPUs per worker", gpus(s.Prefill)), fmt.Sprintf("%d GPUs per worker", fp.GPUsPerPrefill), nil)
		}
		if res.Disaggregated && gpus(s.Decode) != fp.GPUsPerDecode {
			fail(s.Decode, "tp", fmt.Sprintf("%d GPUs per worker", gpus(s.Decode)), fmt.Sprintf("%d GPUs per worker", fp.GPUsPerDecode), nil)
		}
	}
	// Engine parallelism per role, as SGLang spells it. vLLM and TRT-LLM
	// split TP/DP differently; their recipes are compared on GPUs only.
	roles := []struct {
		w    *ixconfig.Worker
		role string
	}{{s.Prefill, "prefill"}, {s.Decode, "decode"}}
	if !res.Disaggregated {
		roles = roles[:1]
		roles[0].role = "aggregated"
	}
	sglang := false
	for _, r := range roles {
		cfg := rv.roleConfig(r.role)
		if cfg == nil || rv.Engine.Type != "sglang" {
			continue
		}
		sglang = true
		if v, _, pos, ok := rv.lookup(cfg, "tensor-parallel-size", "tp-size", "tp"); ok {
			if tp, ok := intOf(v); ok && tp != r.w.TP {
				fail(r.w, "tp", itoa(r.w.TP), itoa(tp)+" (tensor-parallel-size)", &pos)
			}
		}
		ep, epAt := 1, (*strictyaml.Pos)(nil)
		if v, _, pos, ok := rv.lookup(cfg, "expert-parallel-size", "ep-size", "ep"); ok {
			if n, ok := intOf(v); ok {
				ep, epAt = n, &pos
			}
		}
		if ep != r.w.EP {
			fail(r.w, "ep", itoa(r.w.EP), itoa(ep)+" (expert-parallel-size)", epAt)
		}
		_, dv, dpos, dok := rv.lookup(cfg, "enable-dp-attention")
		if dpa := truthy(dv); dpa != r.w.DPAttn {
			var at *strictyaml.Pos
			if dok {
				at = &dpos
			}
			fail(r.w, "dp-attn", strconv.FormatBool(r.w.DPAttn), strconv.FormatBool(dpa)+" (enable-dp-attention)", at)
		}
	}
	if !sglang {
		c.note("%s: recipe %s has no SGLang engine args; %s compared workers and GPUs only", row.ConfigKey, rv.Path, RuleRecipeRow)
	}
	if claim := ClaimedConc(rv.Recipe); claim > 0 {
		// The search entry's top concurrency: agentic rows hold one conc each.
		concs := s.ConcList
		if len(concs) == 0 && s.ConcEnd != nil {
			concs = []int{*s.ConcEnd}
		}
		if len(concs) > 0 && slices.Max(concs) != claim {
			pos, field := s.Pos, s.Path
			if len(s.ConcListPos) > 0 {
				pos, field = s.ConcListPos[len(s.ConcListPos)-1], s.Path+".conc-list"
			}
			c.add(Finding{Rule: RuleRecipeRow, Pos: pos, Field: field, ConfigKey: row.ConfigKey,
				Got:  fmt.Sprintf("conc %d", slices.Max(concs)),
				Want: fmt.Sprintf("conc %d at the top of the row, as recipe %s claims", claim, rv.Path)})
		}
	}
}
