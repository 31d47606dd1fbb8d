package point

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordedSpec is a planned agentic point as a workflow history recorded it.
func recordedSpec(t *testing.T) Spec {
	t.Helper()
	f, err := os.Open("testdata/recorded-specs.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	require.True(t, sc.Scan())
	var s Spec
	require.NoError(t, json.Unmarshal(sc.Bytes(), &s))
	return s
}

// TestAtConcIsAnotherPointOfTheDeployment: an added point keeps the
// deployment (hash, recipe, image, profile) and changes only what the
// concurrency names: identity, ID, exp-name, baseline key and the row's
// conc and exp-name, in the row's field order. Its eval and faults go.
func TestAtConcIsAnotherPointOfTheDeployment(t *testing.T) {
	s := recordedSpec(t)
	s.Faults = []Fault{{Stage: StagePerf, Times: 1}}
	require.Equal(t, 64, s.Conc)
	require.True(t, s.Eval)
	dep, err := Parse(s.Identity)
	require.NoError(t, err)

	a, err := s.AtConc(96)
	require.NoError(t, err)
	require.Equal(t, 96, a.Conc)
	require.Equal(t, dep.DeploymentHash+"-c96", a.Identity)
	require.Equal(t, dep.DeploymentHash, a.DeploymentHash)
	require.Equal(t, "dsv4_p1x8ep8dpa_d1x16ep16dpa_conc96_kvdram-hicache", a.ExpName)
	require.Equal(t, ID(a.ExpName, Identity{DeploymentHash: dep.DeploymentHash, Conc: 96}), a.PointID)
	require.True(t, strings.HasSuffix(a.BaselineKey, "-c96"), a.BaselineKey)
	require.Equal(t, strings.TrimSuffix(s.BaselineKey, "-c64"), strings.TrimSuffix(a.BaselineKey, "-c96"))
	require.False(t, a.Eval)
	require.False(t, a.Profile.Eval)
	require.Equal(t, a.Profile.Hash(), a.ProfileHash)
	require.NotEqual(t, s.ProfileHash, a.ProfileHash, "the planned point's profile had its eval")
	require.Empty(t, a.Faults)
	require.Equal(t, s.RecipePath, a.RecipePath)
	require.Equal(t, s.Image, a.Image)
	require.Equal(t, s.Nodes, a.Nodes)

	// The row: conc and exp-name changed, nothing else, order kept.
	var before, after map[string]any
	require.NoError(t, json.Unmarshal(s.Row, &before))
	require.NoError(t, json.Unmarshal(a.Row, &after))
	require.Equal(t, []any{96.0}, after["conc"])
	require.Equal(t, a.ExpName, after["exp-name"])
	delete(before, "conc")
	delete(after, "conc")
	delete(before, "exp-name")
	delete(after, "exp-name")
	require.Equal(t, before, after)
	require.Equal(t, keyOrder(t, s.Row), keyOrder(t, a.Row))

	// The planned point is untouched.
	require.Equal(t, 64, s.Conc)
	require.Contains(t, string(s.Row), `"conc":[64]`)
}

func keyOrder(t *testing.T, row json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(row))
	_, err := dec.Token()
	require.NoError(t, err)
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var v json.RawMessage
		require.NoError(t, dec.Decode(&v))
	}
	return keys
}

// A fixed-seq-len row names no concurrency in its exp-name and may hold a
// plain conc; the added point keeps the exp-name and gets its own conc.
func TestAtConcFixedSeqLen(t *testing.T) {
	s := Spec{PointID: "dsv4_1k1k_abcdef01-c8", ExpName: "dsv4_1k1k", Conc: 8, DeploymentHash: "abcdef0123", Identity: "abcdef0123-c8",
		Row: json.RawMessage(`{"conc":8,"exp-name":"dsv4_1k1k","isl":1024}`)}
	a, err := s.AtConc(16)
	require.NoError(t, err)
	require.Equal(t, "dsv4_1k1k", a.ExpName)
	require.Equal(t, "dsv4_1k1k_abcdef01-c16", a.PointID)
	require.JSONEq(t, `{"conc":16,"exp-name":"dsv4_1k1k","isl":1024}`, string(a.Row))
	_, err = s.AtConc(0)
	require.Error(t, err)
}

func TestAdaptiveValidate(t *testing.T) {
	ok := []Adaptive{
		{ConfigKey: "k", Mode: AdaptiveFill, MaxPoints: 3},
		{ConfigKey: "k", Mode: AdaptiveFill, Factor: 1.5, MaxPoints: 1, MaxNodeHours: 10},
		{ConfigKey: "k", Mode: AdaptiveSLO, SLO: &SLO{Metric: SLOTTFTp99, Max: 2}, Grid: Grid{Step: 64}, MaxPoints: 6},
		{ConfigKey: "k", Mode: AdaptiveSLO, SLO: &SLO{Metric: SLOIntvtyMedian, Min: 50}, Grid: Grid{Min: 64, Max: 1280, Step: 64}, MaxPoints: 6},
	}
	for _, a := range ok {
		require.NoError(t, a.Validate(), "%+v", a)
	}
	bad := map[string]Adaptive{
		"mode":           {ConfigKey: "k", Mode: "grow", MaxPoints: 1},
		"max-points":     {ConfigKey: "k", Mode: AdaptiveFill},
		"factor":         {ConfigKey: "k", Mode: AdaptiveFill, Factor: 1, MaxPoints: 1},
		"slo: required":  {ConfigKey: "k", Mode: AdaptiveSLO, Grid: Grid{Step: 1}, MaxPoints: 1},
		"must stay high": {ConfigKey: "k", Mode: AdaptiveSLO, SLO: &SLO{Metric: SLOIntvtyMedian, Max: 50}, Grid: Grid{Step: 1}, MaxPoints: 1},
		"must stay low":  {ConfigKey: "k", Mode: AdaptiveSLO, SLO: &SLO{Metric: SLOE2ELMedian, Min: 5}, Grid: Grid{Step: 1}, MaxPoints: 1},
		"grid.step":      {ConfigKey: "k", Mode: AdaptiveSLO, SLO: &SLO{Metric: SLOE2ELMedian, Max: 5}, MaxPoints: 1},
		"above max":      {ConfigKey: "k", Mode: AdaptiveSLO, SLO: &SLO{Metric: SLOE2ELMedian, Max: 5}, Grid: Grid{Min: 9, Max: 8, Step: 1}, MaxPoints: 1},
		"only for mode":  {ConfigKey: "k", Mode: AdaptiveFill, SLO: &SLO{Metric: SLOE2ELMedian, Max: 5}, MaxPoints: 1},
		"max-node-hours": {ConfigKey: "k", Mode: AdaptiveFill, MaxPoints: 1, MaxNodeHours: -1},
	}
	for want, a := range bad {
		err := a.Validate()
		require.Error(t, err, want)
		require.Contains(t, err.Error(), want)
	}
}

func TestParseAdaptive(t *testing.T) {
	a, err := ParseAdaptive("key-a=fill,factor=1.5,max-points=2,max-node-hours=12.5")
	require.NoError(t, err)
	require.Equal(t, Adaptive{ConfigKey: "key-a", Mode: AdaptiveFill, Factor: 1.5, MaxPoints: 2, MaxNodeHours: 12.5}, a)
	a, err = ParseAdaptive("key-b=slo,metric=median_intvty,min=50,step=128,grid-max=1280,topology=2P1D DEP16/DEP32")
	require.NoError(t, err)
	require.Equal(t, Adaptive{ConfigKey: "key-b", Mode: AdaptiveSLO, Topology: "2P1D DEP16/DEP32", SLO: &SLO{Metric: SLOIntvtyMedian, Min: 50},
		Grid: Grid{Max: 1280, Step: 128}, MaxPoints: DefaultAdaptivePoints}, a)
	for _, bad := range []string{"fill", "k=fill,bogus=1", "k=fill,factor=x", "k=slo,metric=p99_ttft,max=2", "k=fill,max-points"} {
		_, err := ParseAdaptive(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), bad)
	}
}

func TestSLOValue(t *testing.T) {
	p := &PerfSummary{TTFTp90Ms: 1500, TTFTp99Ms: 2500, TPOTMedianMs: 20, E2ELMedianMs: 30000, Interactivity: 60}
	for metric, want := range map[string]float64{SLOTTFTp90: 1.5, SLOTTFTp99: 2.5, SLOTPOTMedian: 0.02, SLOE2ELMedian: 30, SLOIntvtyMedian: 60} {
		v, ok := SLO{Metric: metric}.Value(p)
		require.True(t, ok, metric)
		require.InDelta(t, want, v, 1e-9, metric)
	}
	_, ok := SLO{Metric: SLOTTFTp99}.Value(&PerfSummary{TTFTp90Ms: 1})
	require.False(t, ok, "an aiperf result has no p99: not measured, never 0 s")
	require.True(t, SLO{Metric: SLOTTFTp99, Max: 2}.Meets(2))
	require.False(t, SLO{Metric: SLOTTFTp99, Max: 2}.Meets(2.01))
	require.True(t, SLO{Metric: SLOIntvtyMedian, Min: 50}.Meets(50))
	require.False(t, SLO{Metric: SLOIntvtyMedian, Min: 50}.Meets(49.9))
	require.Equal(t, "p99_ttft <= 2 s", SLO{Metric: SLOTTFTp99, Max: 2}.String())
}

// RowDeployment is one string for every point of a deployment, however
// its row was written, and another for another deployment.
func TestRowDeployment(t *testing.T) {
	s := recordedSpec(t)
	a, err := s.AtConc(96)
	require.NoError(t, err)
	want, err := RowDeployment(s.Row)
	require.NoError(t, err)
	got, err := RowDeployment(a.Row)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NotContains(t, want, `"conc"`)
	require.NotContains(t, want, `"exp-name"`)
	// An HTML-escaped spelling of the same row (json.Marshal's) is the same deployment.
	escaped := json.RawMessage(strings.Replace(string(s.Row), `"nixl"`, `"ni\u0078l"`, 1))
	require.NotEqual(t, string(s.Row), string(escaped))
	got, err = RowDeployment(escaped)
	require.NoError(t, err)
	require.Equal(t, want, got)
	other, err := RowDeployment(json.RawMessage(strings.Replace(string(s.Row), `"nixl"`, `"mooncake"`, 1)))
	require.NoError(t, err)
	require.NotEqual(t, want, other)
}
