package ixconfig

import (
	"os"

	"gopkg.in/yaml.v3"

	"github.com/sweepflow/sweepflow/config/strictyaml"
)

// Runners is an InferenceX runners file: labels naming concrete runners, and
// per-label hardware facts used for KV-offload sizing and capacity.
type Runners struct {
	Path       string // display path
	LabelOrder []string
	Labels     map[string][]string
	Hardware   map[string]*Hardware
}

// Hardware is one hardware.<label> entry.
type Hardware struct {
	Pos                 strictyaml.Pos
	AvailableCPUDRAMMiB int64
	GPUsPerNode         int
}

var (
	runnersFields  = []string{"labels", "hardware"}
	hardwareFields = []string{"available-cpu-dram-mib", "gpus-per-node"}
)

// LoadRunners reads and validates a runners file (spec §2.8).
func LoadRunners(path string) (*Runners, error) {
	display := strictyaml.DisplayPath(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &strictyaml.Error{Pos: strictyaml.Pos{File: display}, Msg: "cannot read runner config: " + strictyaml.CleanIOError(err)}
	}
	return ParseRunners(display, data)
}

// ParseRunners validates a runners document held in memory.
func ParseRunners(display string, data []byte) (*Runners, error) {
	var errs strictyaml.Errors
	r := &Runners{Path: display, Labels: map[string][]string{}, Hardware: map[string]*Hardware{}}
	root, err := strictyaml.Parse(display, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{&strictyaml.Decoder{File: display, Errs: &errs}}
	top := d.Mapping(root, "", runnersFields)
	if top == nil {
		return nil, errs.Err()
	}
	if lv := top.Get("labels"); lv == nil {
		d.Errorf(top.Node, "labels", "runner config must define a labels mapping")
	} else if lm := d.Mapping(lv, "labels", nil); lm != nil {
		for _, label := range lm.Keys {
			field := "labels." + label
			items, ok := d.Seq(lm.Values[label], field)
			if !ok {
				continue
			}
			if len(items) == 0 {
				d.Errorf(lm.Values[label], field, "cannot be an empty list")
				continue
			}
			var names []string
			for i, it := range items {
				if s, ok := d.Str(it, strictyaml.Index(field, i)); ok {
					names = append(names, s)
				}
			}
			r.LabelOrder = append(r.LabelOrder, label)
			r.Labels[label] = names
		}
	}
	if top.Has("hardware") {
		if hm := d.Mapping(top.Values["hardware"], "hardware", nil); hm != nil {
			for _, label := range hm.Keys {
				if h := d.hardware(hm.Values[label], "hardware."+label); h != nil {
					r.Hardware[label] = h
				}
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

func (d *decoder) hardware(n *yaml.Node, path string) *Hardware {
	m := d.Mapping(n, path, hardwareFields)
	if m == nil {
		return nil
	}
	h := &Hardware{Pos: d.Pos(m.Node)}
	if v, ok := m.ReqInt("available-cpu-dram-mib"); ok {
		if v <= 0 {
			d.Errorf(m.Values["available-cpu-dram-mib"], m.Field("available-cpu-dram-mib"), "must be > 0, got %d", v)
		}
		h.AvailableCPUDRAMMiB = v
	}
	if v, ok := m.ReqInt("gpus-per-node"); ok {
		if v <= 0 || v > 1<<16 {
			d.Errorf(m.Values["gpus-per-node"], m.Field("gpus-per-node"), "must be > 0, got %d", v)
		}
		h.GPUsPerNode = int(v)
	}
	return h
}
