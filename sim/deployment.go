package sim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Deployment is the serving topology the simulator stands for, in the
// vocabulary of an InferenceX matrix row: worker counts and per-worker
// tensor/expert parallelism with or without DP-attention, aggregated or
// disaggregated prefill/decode.
//
// A worker uses TP GPUs (workers×tp, as InferenceX counts GPUs). For an
// aggregated deployment the whole worker sits in the prefill fields and
// DecodeWorkers is 0 (InferenceX's convention, so GPUs are counted once).
type Deployment struct {
	PrefillWorkers, PrefillTP, PrefillEP int
	PrefillDPA                           bool
	DecodeWorkers, DecodeTP, DecodeEP    int
	DecodeDPA                            bool
	Disagg                               bool
	GPUsPerNode                          int
}

// DefaultGPUsPerNode is a GB200 NVL72 compute tray.
const DefaultGPUsPerNode = 4

// PrefillGPUs is the number of GPUs in prefill workers (all GPUs when aggregated).
func (d Deployment) PrefillGPUs() int { return d.PrefillWorkers * d.PrefillTP }

// DecodeGPUs is the number of GPUs in decode workers; 0 when aggregated.
func (d Deployment) DecodeGPUs() int { return d.DecodeWorkers * d.DecodeTP }

// TotalGPUs counts every GPU once.
func (d Deployment) TotalGPUs() int { return d.PrefillGPUs() + d.DecodeGPUs() }

// Nodes is the node footprint: a worker larger than a node takes whole nodes.
func (d Deployment) Nodes() int {
	gpn := d.GPUsPerNode
	if gpn <= 0 {
		gpn = DefaultGPUsPerNode
	}
	nodes := func(workers, tp int) int { return workers * ((tp + gpn - 1) / gpn) }
	return nodes(d.PrefillWorkers, d.PrefillTP) + nodes(d.DecodeWorkers, d.DecodeTP)
}

// String renders the shorthand ParseDeployment reads: "2P1D DEP16/DEP32",
// "TP8 agg", "2xTP8 agg".
func (d Deployment) String() string {
	p := specString(d.PrefillTP, d.PrefillEP, d.PrefillDPA)
	if !d.Disagg {
		if d.PrefillWorkers > 1 {
			return fmt.Sprintf("%dx%s agg", d.PrefillWorkers, p)
		}
		return p + " agg"
	}
	return fmt.Sprintf("%dP%dD %s/%s", d.PrefillWorkers, d.DecodeWorkers, p,
		specString(d.DecodeTP, d.DecodeEP, d.DecodeDPA))
}

func specString(tp, ep int, dpa bool) string {
	switch {
	case dpa && ep == tp:
		return "DEP" + strconv.Itoa(tp)
	case !dpa && ep == tp && tp > 1:
		return "TEP" + strconv.Itoa(tp)
	}
	s := "TP" + strconv.Itoa(tp)
	if ep > 1 {
		s += "EP" + strconv.Itoa(ep)
	}
	if dpa {
		s += "DPA"
	}
	return s
}

// Validate reports the first field that makes the deployment unusable.
func (d Deployment) Validate() error {
	if d.PrefillWorkers < 0 || d.DecodeWorkers < 0 {
		return fmt.Errorf("worker counts must not be negative")
	}
	if d.Disagg {
		if d.PrefillWorkers < 1 {
			return fmt.Errorf("prefill workers must be >= 1 when disaggregated, got %d", d.PrefillWorkers)
		}
		if d.DecodeWorkers < 1 {
			return fmt.Errorf("decode workers must be >= 1 when disaggregated, got %d", d.DecodeWorkers)
		}
	} else if d.PrefillWorkers < 1 {
		return fmt.Errorf("an aggregated deployment needs prefill workers >= 1 (decode workers stay 0), got %d", d.PrefillWorkers)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"prefill tp", d.PrefillTP}, {"prefill ep", d.PrefillEP}} {
		if f.v < 1 {
			return fmt.Errorf("%s must be >= 1, got %d", f.name, f.v)
		}
	}
	if d.Disagg {
		if d.DecodeTP < 1 {
			return fmt.Errorf("decode tp must be >= 1, got %d", d.DecodeTP)
		}
		if d.DecodeEP < 1 {
			return fmt.Errorf("decode ep must be >= 1, got %d", d.DecodeEP)
		}
	}
	if d.GPUsPerNode < 0 {
		return fmt.Errorf("gpus per node must not be negative")
	}
	return nil
}

var (
	pdRe   = regexp.MustCompile(`^(\d+)P(\d+)D$`)
	specRe = regexp.MustCompile(`^(?:(\d+)X)?(DEP|TEP|TP)(\d+)(?:EP(\d+))?(DPA)?$`)
	// exp-name form used by InferenceX multinode rows: p2x16ep16dpa_d1x32ep32dpa
	expRe = regexp.MustCompile(`^P(\d+)X(\d+)(?:EP(\d+))?(DPA)?_D(\d+)X(\d+)(?:EP(\d+))?(DPA)?$`)
)

type parSpec struct {
	workers, tp, ep int
	dpa             bool
}

func parseSpec(s string) (parSpec, bool) {
	m := specRe.FindStringSubmatch(s)
	if m == nil {
		return parSpec{}, false
	}
	p := parSpec{workers: atoi(m[1], 1), tp: atoi(m[3], 0)}
	switch m[2] {
	case "DEP":
		p.ep, p.dpa = p.tp, true
	case "TEP":
		p.ep = p.tp
	default:
		p.ep = 1
	}
	if m[4] != "" {
		p.ep = atoi(m[4], 0)
	}
	if m[5] != "" {
		p.dpa = true
	}
	return p, true
}

func atoi(s string, def int) int {
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// ParseDeployment reads a topology shorthand:
//
//	"2P1D DEP16/DEP32"  2 prefill workers of DEP16, 1 decode worker of DEP32
//	"1P6D DEP8/TP4"     DEPn = TPn+EPn+DP-attention, TEPn = TPn+EPn, TPn = TP only
//	"1P1D TP8EP8DPA/TP16" explicit form, also "1P1D DEP8" (same spec both sides)
//	"TP8 agg", "2xTP8 agg", "TP8"  aggregated
//	"p2x16ep16dpa_d1x32ep32dpa"     InferenceX exp-name form
//
// Matching is case-insensitive. GPUsPerNode is set to the GB200 default.
func ParseDeployment(s string) (Deployment, error) {
	orig := s
	s = strings.ToUpper(strings.TrimSpace(s))
	if s == "" {
		return Deployment{}, fmt.Errorf("deployment %q: empty", orig)
	}
	d := Deployment{GPUsPerNode: DefaultGPUsPerNode}
	if m := expRe.FindStringSubmatch(s); m != nil {
		d.Disagg = true
		d.PrefillWorkers, d.PrefillTP, d.PrefillEP, d.PrefillDPA = atoi(m[1], 0), atoi(m[2], 0), atoi(m[3], 1), m[4] != ""
		d.DecodeWorkers, d.DecodeTP, d.DecodeEP, d.DecodeDPA = atoi(m[5], 0), atoi(m[6], 0), atoi(m[7], 1), m[8] != ""
		if d.DecodeWorkers == 0 { // InferenceX writes aggregated points as decode num-worker 0
			d.Disagg = false
			d.DecodeTP, d.DecodeEP, d.DecodeDPA = d.PrefillTP, d.PrefillEP, d.PrefillDPA
		}
		if err := d.Validate(); err != nil {
			return Deployment{}, fmt.Errorf("deployment %q: %w", orig, err)
		}
		return d, nil
	}
	var (
		haveCounts, agg, disagg bool
		specs                   []parSpec
	)
	for _, tok := range strings.Fields(s) {
		switch {
		case tok == "AGG":
			agg = true
		case tok == "DISAGG":
			disagg = true
		case pdRe.MatchString(tok):
			m := pdRe.FindStringSubmatch(tok)
			d.PrefillWorkers, d.DecodeWorkers = atoi(m[1], 0), atoi(m[2], 0)
			haveCounts = true
		default:
			parts := strings.Split(tok, "/")
			if len(parts) > 2 || len(specs) > 0 {
				return Deployment{}, fmt.Errorf("deployment %q: unexpected %q (want e.g. \"2P1D DEP16/DEP32\" or \"TP8 agg\")", orig, tok)
			}
			for _, p := range parts {
				ps, ok := parseSpec(p)
				if !ok {
					return Deployment{}, fmt.Errorf("deployment %q: cannot read parallelism %q (want DEPn, TEPn, TPn or TPnEPm[DPA])", orig, p)
				}
				specs = append(specs, ps)
			}
		}
	}
	if len(specs) == 0 {
		return Deployment{}, fmt.Errorf("deployment %q: no parallelism given (want e.g. DEP16/DEP32 or TP8)", orig)
	}
	if agg && (disagg || haveCounts || len(specs) == 2) {
		return Deployment{}, fmt.Errorf("deployment %q: \"agg\" cannot be combined with prefill/decode counts or a prefill/decode pair", orig)
	}
	p := specs[0]
	dec := specs[len(specs)-1]
	if haveCounts || disagg || len(specs) == 2 {
		if !haveCounts {
			return Deployment{}, fmt.Errorf("deployment %q: disaggregated deployment needs worker counts such as 1P1D", orig)
		}
		if p.workers != 1 || dec.workers != 1 {
			return Deployment{}, fmt.Errorf("deployment %q: give worker counts in the NPMD token, not as Nx", orig)
		}
		d.Disagg = true
		d.PrefillTP, d.PrefillEP, d.PrefillDPA = p.tp, p.ep, p.dpa
		d.DecodeTP, d.DecodeEP, d.DecodeDPA = dec.tp, dec.ep, dec.dpa
	} else {
		d.PrefillWorkers = p.workers
		d.PrefillTP, d.PrefillEP, d.PrefillDPA = p.tp, p.ep, p.dpa
		d.DecodeTP, d.DecodeEP, d.DecodeDPA = p.tp, p.ep, p.dpa
	}
	if err := d.Validate(); err != nil {
		return Deployment{}, fmt.Errorf("deployment %q: %w", orig, err)
	}
	return d, nil
}
