package checklist

import (
	"fmt"
	"strings"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
)

// establishedSKUs are the hardware the checklist calls established: there a
// vLLM/SGLang row must run an upstream image and other engines come second.
// Anything else (MI455X, VR200, Rubin, TPUs) is new hardware.
var establishedSKUs = []string{"gb200", "gb300", "b200", "b300", "h100", "h200", "mi300x", "mi325x", "mi355x"}

// sku is the established SKU a runner label names ("cluster:gb200-nv" ->
// gb200), or "" for new hardware. Longer names are tried first so gb200 is
// not read as b200.
func sku(runner string) string {
	r := strings.ToLower(strings.TrimPrefix(runner, "cluster:"))
	for _, s := range establishedSKUs {
		if strings.HasPrefix(r, s) {
			return s
		}
	}
	for _, s := range establishedSKUs {
		if strings.Contains(r, s) {
			return s
		}
	}
	return ""
}

// upstreamOrgs are the Docker Hub organisations of the upstream projects.
var upstreamOrgs = map[string]string{"vllm": "vllm", "sglang": "lmsysorg"}

// imageRepo normalises an image reference to "org/repo": `#` is written
// for `/` in some master configs, and docker.io is the default registry.
func imageRepo(image string) string {
	s := strings.ReplaceAll(strings.TrimSpace(image), "#", "/")
	if i := strings.Index(s, "@"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		s = s[:i]
	}
	for _, p := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

func (c *checker) image(e *ixconfig.Entry) {
	eng := engineOf(e.Framework)
	org, ok := upstreamOrgs[eng]
	if !ok {
		return
	}
	hw := sku(e.Runner)
	if hw == "" {
		c.note("%s: runner %s is not an established SKU; %s does not apply", e.Key, e.Runner, RuleUpstreamImage)
		return
	}
	repo := imageRepo(e.Image)
	if strings.HasPrefix(repo, org+"/") {
		return
	}
	want := map[string]string{"vllm": "vllm/vllm-openai:<tag> or vllm/vllm-openai-rocm:<tag>",
		"sglang": "lmsysorg/sglang:<tag> or lmsysorg/sglang-rocm:<tag>"}[eng]
	c.add(Finding{Rule: RuleUpstreamImage, Pos: e.FieldPos("image"), Field: e.Key + ".image", ConfigKey: e.Key,
		Got: fmt.Sprintf("%s (framework %s on %s)", e.Image, e.Framework, hw), Want: "an upstream image " + want})
}

// engineFirst: a non-vLLM/SGLang entry needs a vLLM or SGLang entry for the
// same model prefix on the same SKU somewhere in the loaded master configs.
func (c *checker) engineFirst(e *ixconfig.Entry) {
	eng := engineOf(e.Framework)
	if _, upstream := upstreamOrgs[eng]; upstream {
		return
	}
	hw := sku(e.Runner)
	if hw == "" {
		c.note("%s: runner %s is new hardware; %s allows a hardware-specific engine first", e.Key, e.Runner, RuleEngineFirst)
		return
	}
	for _, o := range c.master.Entries {
		if _, up := upstreamOrgs[engineOf(o.Framework)]; up && o.ModelPrefix == e.ModelPrefix && sku(o.Runner) == hw {
			return
		}
	}
	c.add(Finding{Rule: RuleEngineFirst, Pos: e.FieldPos("framework"), Field: e.Key + ".framework", ConfigKey: e.Key,
		Got:  fmt.Sprintf("%s for %s on %s with no vLLM/SGLang entry for them", e.Framework, e.ModelPrefix, hw),
		Want: fmt.Sprintf("a vllm or sglang entry for model-prefix %s on %s first", e.ModelPrefix, hw)})
}
