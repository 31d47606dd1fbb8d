package point

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Adaptive modes.
const (
	// AdaptiveFill adds the concurrencies `starter coverage` suggests for a
	// config key's latency curve until no gap is wider than the factor.
	AdaptiveFill = "fill"
	// AdaptiveSLO finds each deployment's largest concurrency whose figure
	// meets an SLO: it brackets, then bisects on a concurrency grid.
	AdaptiveSLO = "slo"
)

// SLO metrics, named as agg_bmk.json names the figures. Latencies are in
// seconds and must stay at or below the SLO; interactivity (tok/s/user)
// must stay at or above it.
const (
	SLOTTFTp90      = "p90_ttft"
	SLOTTFTp99      = "p99_ttft"
	SLOTPOTMedian   = "median_tpot"
	SLOE2ELMedian   = "median_e2el"
	SLOIntvtyMedian = "median_intvty"
)

// SLOMetrics lists the metrics an SLO may name.
var SLOMetrics = []string{SLOTTFTp90, SLOTTFTp99, SLOTPOTMedian, SLOE2ELMedian, SLOIntvtyMedian}

// Adaptive is a config key's request for adaptive points (a sweep file's
// adaptive: entry, or `sweep start --adaptive`): which search, and the
// budget it may spend. Every added point runs on a deployment of the key
// whose server is up; none causes a bring-up.
type Adaptive struct {
	ConfigKey string `json:"config_key"`
	Mode      string `json:"mode"`
	// Topology limits the search to the key's deployments of this topology
	// ("2P1D DEP16/DEP32"); empty: every deployment of the key.
	Topology string `json:"topology,omitempty"`
	// Factor (fill) is the largest ratio allowed between neighbouring
	// points, as `starter coverage --factor` (default 2).
	Factor float64 `json:"factor,omitempty"`
	// SLO (slo) is the figure to meet.
	SLO *SLO `json:"slo,omitempty"`
	// Grid (slo) is the candidate concurrencies: Min to Max in steps of
	// Step. Min 0 is the deployment's lowest planned concurrency, Max 0 its
	// recipe's claimed concurrency (else its highest planned one).
	Grid Grid `json:"grid,omitempty"`
	// MaxPoints and MaxNodeHours are the key's budget: added points, and
	// the node-hours they may hold (nodes x their time on the server).
	MaxPoints    int     `json:"max_points"`
	MaxNodeHours float64 `json:"max_node_hours,omitempty"`
	// WorstCase is the forecast's: the search adds points on the key's
	// largest deployment until the budget is spent, whatever the figures.
	WorstCase bool `json:"worst_case,omitempty"`
}

// SLO is one figure's bound: Max for a latency (seconds), Min for
// interactivity (tok/s/user).
type SLO struct {
	Metric string  `json:"metric"`
	Max    float64 `json:"max,omitempty"`
	Min    float64 `json:"min,omitempty"`
}

// Grid is an slo search's candidate concurrencies.
type Grid struct {
	Min  int `json:"min,omitempty"`
	Max  int `json:"max,omitempty"`
	Step int `json:"step"`
}

// DefaultAdaptivePoints is the added points a key may have when its
// request names no budget.
const DefaultAdaptivePoints = 3

// String is the request as start and status print it.
func (a Adaptive) String() string {
	s := a.ConfigKey
	if a.Topology != "" {
		s += " (" + a.Topology + ")"
	}
	switch a.Mode {
	case AdaptiveFill:
		f := a.Factor
		if f == 0 {
			f = 2 // curvegaps.DefaultFactor, which this package cannot import
		}
		s += fmt.Sprintf(": fill gaps wider than x%g", f)
	case AdaptiveSLO:
		if a.SLO != nil {
			s += ": slo " + a.SLO.String()
		}
		lo, hi := "lowest planned", "recipe's claim"
		if a.Grid.Min > 0 {
			lo = "c" + strconv.Itoa(a.Grid.Min)
		}
		if a.Grid.Max > 0 {
			hi = "c" + strconv.Itoa(a.Grid.Max)
		}
		s += fmt.Sprintf(" on %s..%s step %d", lo, hi, a.Grid.Step)
	}
	s += fmt.Sprintf(", up to %d added points", a.MaxPoints)
	if a.MaxNodeHours > 0 {
		s += fmt.Sprintf(" and %g node-hours", a.MaxNodeHours)
	}
	return s
}

// Validate checks a request on its own (that its key and topology exist
// is the plan's to say). Each message starts with the field it is about.
func (a Adaptive) Validate() error {
	switch {
	case a.ConfigKey == "":
		return fmt.Errorf("config-key: required")
	case a.MaxPoints < 1:
		return fmt.Errorf("max-points: must be at least 1, got %d", a.MaxPoints)
	case a.MaxNodeHours < 0 || math.IsNaN(a.MaxNodeHours) || math.IsInf(a.MaxNodeHours, 0):
		return fmt.Errorf("max-node-hours: must be a number of node-hours >= 0 (0: no node-hour budget), got %v", a.MaxNodeHours)
	}
	switch a.Mode {
	case AdaptiveFill:
		if a.Factor != 0 && (!(a.Factor > 1) || math.IsInf(a.Factor, 0)) {
			return fmt.Errorf("factor: must be a finite number above 1, got %v", a.Factor)
		}
		if a.SLO != nil || a.Grid != (Grid{}) {
			return fmt.Errorf("slo, grid: only for mode slo")
		}
	case AdaptiveSLO:
		if a.Factor != 0 {
			return fmt.Errorf("factor: only for mode fill")
		}
		if a.SLO == nil {
			return fmt.Errorf("slo: required for mode slo")
		}
		if err := a.SLO.Validate(); err != nil {
			return fmt.Errorf("slo: %w", err)
		}
		g := a.Grid
		switch {
		case g.Step < 1:
			return fmt.Errorf("grid.step: must be at least 1, got %d", g.Step)
		case g.Min < 0 || g.Max < 0:
			return fmt.Errorf("grid: min and max must be >= 0 (0: from the deployment), got %d..%d", g.Min, g.Max)
		case g.Max > 0 && g.Min > g.Max:
			return fmt.Errorf("grid: min %d above max %d", g.Min, g.Max)
		}
	default:
		return fmt.Errorf("mode: want %s or %s, got %q", AdaptiveFill, AdaptiveSLO, a.Mode)
	}
	return nil
}

// Validate checks the metric and that its bound goes the right way.
func (s SLO) Validate() error {
	switch s.Metric {
	case SLOIntvtyMedian:
		if s.Max != 0 || !(s.Min > 0) {
			return fmt.Errorf("%s is a rate that must stay high: give min (tok/s/user) > 0, not max", s.Metric)
		}
	case SLOTTFTp90, SLOTTFTp99, SLOTPOTMedian, SLOE2ELMedian:
		if s.Min != 0 || !(s.Max > 0) {
			return fmt.Errorf("%s is a latency that must stay low: give max (seconds) > 0, not min", s.Metric)
		}
	default:
		return fmt.Errorf("metric: want one of %s, got %q", strings.Join(SLOMetrics, ", "), s.Metric)
	}
	return nil
}

// String is the SLO as status and reports print it: "p99_ttft <= 2 s".
func (s SLO) String() string {
	if s.Metric == SLOIntvtyMedian {
		return fmt.Sprintf("%s >= %g tok/s/user", s.Metric, s.Min)
	}
	return fmt.Sprintf("%s <= %g s", s.Metric, s.Max)
}

// Value is the SLO's figure in p (seconds or tok/s/user); ok is false when
// p does not carry it (0: not measured).
func (s SLO) Value(p *PerfSummary) (float64, bool) {
	if p == nil {
		return 0, false
	}
	var v float64
	switch s.Metric {
	case SLOTTFTp90:
		v = p.TTFTp90Ms / 1000
	case SLOTTFTp99:
		v = p.TTFTp99Ms / 1000
	case SLOTPOTMedian:
		v = p.TPOTMedianMs / 1000
	case SLOE2ELMedian:
		v = p.E2ELMedianMs / 1000
	case SLOIntvtyMedian:
		v = p.Interactivity
	}
	return v, v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v)
}

// Meets reports whether a figure meets the SLO.
func (s SLO) Meets(v float64) bool {
	if s.Metric == SLOIntvtyMedian {
		return v >= s.Min
	}
	return v <= s.Max
}

// Bound is the SLO's threshold in its metric's unit.
func (s SLO) Bound() float64 {
	if s.Metric == SLOIntvtyMedian {
		return s.Min
	}
	return s.Max
}

// ParseAdaptive reads `sweep start --adaptive`'s compact form, the sweep
// file's fields as KEY=mode[,field=value...]:
//
//	KEY=fill[,factor=2][,max-points=3][,max-node-hours=20][,topology=T]
//	KEY=slo,metric=p99_ttft,max=2[,min=...],step=64[,grid-min=64][,grid-max=1280][,...]
func ParseAdaptive(s string) (Adaptive, error) {
	key, rest, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return Adaptive{}, fmt.Errorf("--adaptive %q: want CONFIG_KEY=fill|slo[,field=value...]", s)
	}
	parts := strings.Split(rest, ",")
	a := Adaptive{ConfigKey: key, Mode: parts[0], MaxPoints: DefaultAdaptivePoints}
	var slo SLO
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Adaptive{}, fmt.Errorf("--adaptive %q: %q is not field=value", s, kv)
		}
		var err error
		switch k {
		case "topology":
			a.Topology = v
		case "factor":
			a.Factor, err = strconv.ParseFloat(v, 64)
		case "max-points":
			a.MaxPoints, err = strconv.Atoi(v)
		case "max-node-hours":
			a.MaxNodeHours, err = strconv.ParseFloat(v, 64)
		case "metric":
			slo.Metric = v
		case "max":
			slo.Max, err = strconv.ParseFloat(v, 64)
		case "min":
			slo.Min, err = strconv.ParseFloat(v, 64)
		case "step":
			a.Grid.Step, err = strconv.Atoi(v)
		case "grid-min":
			a.Grid.Min, err = strconv.Atoi(v)
		case "grid-max":
			a.Grid.Max, err = strconv.Atoi(v)
		default:
			return Adaptive{}, fmt.Errorf("--adaptive %q: unknown field %q (want topology, factor, max-points, max-node-hours, metric, max, min, step, grid-min, grid-max)", s, k)
		}
		if err != nil {
			return Adaptive{}, fmt.Errorf("--adaptive %q: %s: not a number: %q", s, k, v)
		}
	}
	if slo != (SLO{}) {
		a.SLO = &slo
	}
	if err := a.Validate(); err != nil {
		return Adaptive{}, fmt.Errorf("--adaptive %q: %w", s, err)
	}
	return a, nil
}

// Added marks a point the sweep added to a deployment while its server was
// up: by which search, on which deployment, and why (the gap it split or
// the SLO step it probed). It travels in the point's spec, so the ledger,
// the report, the export and `starter stats` know the point for what it is.
type Added struct {
	Mode string `json:"mode"`
	// Deployment is the deployment hash of the deployment that served it;
	// Topology its topology.
	Deployment string `json:"deployment"`
	Topology   string `json:"topology"`
	Reason     string `json:"reason"`
	// Gap (fill) is the gap the point splits.
	Gap *AddedGap `json:"gap,omitempty"`
	// SLO (slo) is the SLO the point was probed for.
	SLO *SLO `json:"slo,omitempty"`
	// Seq numbers the key's added points from 1, in the order the sweep
	// decided them.
	Seq int `json:"seq"`
}

// AddedGap is a gap of a curve: a metric's values at two neighbouring
// concurrencies.
type AddedGap struct {
	Metric   string  `json:"metric"`
	FromConc int     `json:"from_conc"`
	From     float64 `json:"from"`
	ToConc   int     `json:"to_conc"`
	To       float64 `json:"to"`
}

// AtConc is the spec of another point of s's deployment, at concurrency
// conc: a new identity (the deployment hash with conc), point ID, exp-name
// and matrix row with that concurrency, no eval and no injected faults; the
// measurement profile stays the deployment's.
func (s Spec) AtConc(conc int) (Spec, error) {
	if conc < 1 {
		return Spec{}, fmt.Errorf("point %s: concurrency must be >= 1, got %d", s.PointID, conc)
	}
	dep := s.DeploymentHash
	if dep == "" {
		id, err := Parse(s.Identity)
		if err != nil {
			return Spec{}, fmt.Errorf("point %s has no deployment hash: %w", s.PointID, err)
		}
		dep = id.DeploymentHash
	}
	out := s
	old := "_conc" + strconv.Itoa(s.Conc)
	out.Conc, out.DeploymentHash = conc, dep
	if strings.Contains(s.ExpName, old) {
		out.ExpName = strings.Replace(s.ExpName, old, "_conc"+strconv.Itoa(conc), 1)
	}
	id := Identity{DeploymentHash: dep, Conc: conc}
	out.Identity, out.PointID = id.String(), ID(out.ExpName, id)
	if i := strings.LastIndex(s.BaselineKey, "-c"); i > 0 {
		out.BaselineKey = s.BaselineKey[:i] + "-c" + strconv.Itoa(conc)
	}
	out.Eval, out.Profile.Eval, out.Faults, out.Added = false, false, nil, nil
	out.ProfileHash = out.Profile.Hash()
	if len(s.Row) > 0 {
		row, err := rowAtConc(s.Row, conc, out.ExpName)
		if err != nil {
			return Spec{}, fmt.Errorf("point %s: row: %w", s.PointID, err)
		}
		out.Row = row
	}
	return out, nil
}

// rowAtConc rewrites a matrix row's conc (a list stays a one-element list)
// and exp-name, keeping every other field and the field order.
func rowAtConc(row json.RawMessage, conc int, expName string) (json.RawMessage, error) {
	return rewriteRow(row, func(key string, val json.RawMessage) (json.RawMessage, bool) {
		switch key {
		case "conc":
			if bytes.HasPrefix(bytes.TrimSpace(val), []byte("[")) {
				return json.RawMessage("[" + strconv.Itoa(conc) + "]"), true
			}
			return json.RawMessage(strconv.Itoa(conc)), true
		case "exp-name":
			v, _ := json.Marshal(expName)
			return v, true
		}
		return val, true
	})
}

// RowDeployment is a matrix row without its conc and exp-name, in field
// order, each value in one spelling (sorted keys, no HTML escapes): equal
// for the rows of one deployment's points, an added point's included,
// whatever their concurrency and however their JSON was written.
func RowDeployment(row json.RawMessage) (string, error) {
	var bad error
	out, err := rewriteRow(row, func(key string, val json.RawMessage) (json.RawMessage, bool) {
		dec := json.NewDecoder(bytes.NewReader(val))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			bad = err
			return val, false
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			bad = err
			return val, false
		}
		return bytes.TrimSpace(b.Bytes()), key != "conc" && key != "exp-name"
	})
	if err == nil {
		err = bad
	}
	return string(out), err
}

// rewriteRow walks a JSON object's fields in order; edit returns each
// field's value and whether to keep it.
func rewriteRow(row json.RawMessage, edit func(key string, val json.RawMessage) (json.RawMessage, bool)) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(row))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		val, keep := edit(key, val)
		if !keep {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		var compact bytes.Buffer
		if err := json.Compact(&compact, val); err != nil {
			return nil, err
		}
		b.Write(compact.Bytes())
	}
	b.WriteByte('}')
	return json.RawMessage(b.Bytes()), nil
}
