package point

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func measurement() Measurement {
	return Measurement{Simulated: true, Engine: "simulator", PerfDurationMs: 2000, Warmup: "2xconc", TimeScale: 0.002,
		Workload: "trace", SessionsPerConc: 4, TurnsPerSession: 6, Seed: 1, EvalMode: "lm-eval", EvalLimit: 40, EvalFloor: 0.9,
		PerfClient: PerfClientLoadgen, LoadgenVersion: "2", RandomRangeRatio: 0.8, WarmupISL: 512, WarmupOSL: 64,
		PointSeed: 3, TraceSeed: 1, PrefixCache: "flush", Containers: map[string]string{"sglang": "/images/sglang.sqsh"}}
}

func TestProfileHash(t *testing.T) {
	p := Profile{Scenario: "agentic-coding", DurationSec: 3600, Eval: true, GoldenAL: 3.77, Thinking: true, Backend: "local", Launcher: "local"}
	m := measurement()
	perf := ForStage(StagePerf, p, m).Hash()
	eval := ForStage(StageEval, p, m).Hash()
	cases := []struct {
		name               string
		modP               func(*Profile)
		modM               func(*Measurement)
		perfSame, evalSame bool
	}{
		{"nothing changed", nil, nil, true, true},
		{"perf duration", nil, func(m *Measurement) { m.PerfDurationMs = 3000 }, false, true},
		{"time scale", nil, func(m *Measurement) { m.TimeScale = 1 }, false, false},
		{"seed", nil, func(m *Measurement) { m.Seed = 2 }, false, true},
		{"workload", nil, func(m *Measurement) { m.Workload = "random-isl-osl" }, false, true},
		{"eval limit", nil, func(m *Measurement) { m.EvalLimit = 0 }, true, false},
		{"eval mode", nil, func(m *Measurement) { m.EvalMode = "cot" }, true, false},
		{"eval floor", nil, func(m *Measurement) { m.EvalFloor = 0.95 }, true, false},
		{"eval concurrency", nil, func(m *Measurement) { m.EvalConcurrency = 8 }, true, false},
		{"simulated", nil, func(m *Measurement) { m.Simulated = false; m.Engine = "srtctl" }, false, false},
		{"golden AL", func(p *Profile) { p.GoldenAL = 3.5 }, nil, false, true},
		{"thinking", func(p *Profile) { p.Thinking = false }, nil, false, false},
		{"backend", func(p *Profile) { p.Backend = "slurm" }, nil, false, false},
		{"ISL/OSL", func(p *Profile) { p.ISL, p.OSL = 1024, 1024 }, nil, false, true},
		{"whether the point evaluates", func(p *Profile) { p.Eval = false }, nil, true, true},
		// Issue 24 (found 3): what else changes a perf figure.
		{"perf client", nil, func(m *Measurement) { m.PerfClient = PerfClientBenchmark }, false, true},
		{"load generator version", nil, func(m *Measurement) { m.LoadgenVersion = "3" }, false, true},
		{"random range ratio", nil, func(m *Measurement) { m.RandomRangeRatio = 1 }, false, true},
		{"warmup request sizes", nil, func(m *Measurement) { m.WarmupISL, m.WarmupOSL = 1024, 128 }, false, true},
		{"point seed", nil, func(m *Measurement) { m.PointSeed = 7 }, false, true},
		{"benchmark trace seed", nil, func(m *Measurement) { m.TraceSeed = 7 }, false, true},
		{"prefix cache treatment", nil, func(m *Measurement) { m.PrefixCache = "" }, false, true},
		{"container remapping", nil, func(m *Measurement) { m.Containers = map[string]string{"sglang": "/images/other.sqsh"} }, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p2, m2 := p, m
			if c.modP != nil {
				c.modP(&p2)
			}
			if c.modM != nil {
				c.modM(&m2)
			}
			assert.Equal(t, c.perfSame, ForStage(StagePerf, p2, m2).Hash() == perf, "perf")
			assert.Equal(t, c.evalSame, ForStage(StageEval, p2, m2).Hash() == eval, "eval")
		})
	}
	assert.NotEqual(t, p.Hash(), Profile{}.Hash())
}

// Issue 24 (found 6): a fixed-seq-len run is bounded by its requests, so
// neither the row's duration nor the worker's perf window may block reuse
// of its perf figure; an agentic run's window does.
func TestFixedSeqLenPerfHashIgnoresDuration(t *testing.T) {
	m := measurement()
	fixed := Profile{Scenario: "fixed-seq-len", ISL: 1024, OSL: 1024, DurationSec: 600, Backend: "local", Launcher: "local"}
	f2, m2 := fixed, m
	f2.DurationSec, m2.PerfDurationMs = 1800, 9000
	assert.Equal(t, ForStage(StagePerf, fixed, m).Hash(), ForStage(StagePerf, f2, m2).Hash())
	ag := fixed
	ag.Scenario, ag.ISL, ag.OSL = "agentic-coding", 0, 0
	a2 := ag
	a2.DurationSec = 1800
	assert.NotEqual(t, ForStage(StagePerf, ag, m).Hash(), ForStage(StagePerf, a2, m).Hash())
	assert.NotEqual(t, ForStage(StagePerf, ag, m).Hash(), ForStage(StagePerf, ag, m2).Hash())
}

func TestCanReuse(t *testing.T) {
	p := Profile{Scenario: "agentic-coding", Backend: "local", Launcher: "local"}
	sim := ForStage(StagePerf, p, measurement())
	real := measurement()
	real.Simulated, real.Engine = false, "srtctl"
	realM := ForStage(StagePerf, p, real)
	id := New(base(), 4).String()
	other := New(base(), 8).String()
	stamp := func(id string, m Measured) Stamp {
		return Stamp{Identity: id, ProfileHash: m.Hash(), Simulated: m.Measurement.Simulated, Profile: &m}
	}
	cases := []struct {
		name          string
		stored, want  Stamp
		ok            bool
		reasonContain string
	}{
		{"exact match", stamp(id, sim), stamp(id, sim), true, ""},
		{"other concurrency", stamp(other, sim), stamp(id, sim), false, "identity"},
		{"simulated never stands in for real", stamp(id, sim), stamp(id, realM), false, "simulated"},
		// Even a stamp whose hashes were forged to match is refused.
		{"simulated with matching hashes", Stamp{Identity: id, ProfileHash: realM.Hash(), Simulated: true}, stamp(id, realM), false, "simulated"},
		{"real may not stand in for simulated either (profile)", stamp(id, realM), stamp(id, sim), false, "simulated false -> true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why := CanReuse(c.stored, c.want)
			assert.Equal(t, c.ok, ok, why)
			if c.reasonContain != "" {
				assert.Contains(t, why, c.reasonContain)
			}
		})
	}
}
