package config

import (
	"os"

	"gopkg.in/yaml.v3"
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
	Pos                 Pos
	AvailableCPUDRAMMiB int64
	GPUsPerNode         int
}

var (
	runnersFields  = []string{"labels", "hardware"}
	hardwareFields = []string{"available-cpu-dram-mib", "gpus-per-node"}
)

// LoadRunners reads and validates a runners file (spec §2.8).
func LoadRunners(path string) (*Runners, error) {
	display := DisplayPath(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Pos: Pos{File: display}, Msg: "cannot read runner config: " + cleanIOError(err)}
	}
	return ParseRunners(display, data)
}

// ParseRunners validates a runners document held in memory.
func ParseRunners(display string, data []byte) (*Runners, error) {
	var errs errorList
	r := &Runners{Path: display, Labels: map[string][]string{}, Hardware: map[string]*Hardware{}}
	root, err := parseYAML(display, data)
	if err != nil {
		return nil, err
	}
	d := &decoder{file: display, errs: &errs}
	top := d.mapping(root, "", runnersFields)
	if top == nil {
		return nil, errs.errs.Err()
	}
	if lv := top.get("labels"); lv == nil {
		d.errorf(top.node, "labels", "runner config must define a labels mapping")
	} else if lm := d.mapping(lv, "labels", nil); lm != nil {
		for _, label := range lm.keys {
			field := "labels." + label
			items, ok := d.seq(lm.value[label], field)
			if !ok {
				continue
			}
			if len(items) == 0 {
				d.errorf(lm.value[label], field, "cannot be an empty list")
				continue
			}
			var names []string
			for i, it := range items {
				if s, ok := d.str(it, idx(field, i)); ok {
					names = append(names, s)
				}
			}
			r.LabelOrder = append(r.LabelOrder, label)
			r.Labels[label] = names
		}
	}
	if top.has("hardware") {
		if hm := d.mapping(top.value["hardware"], "hardware", nil); hm != nil {
			for _, label := range hm.keys {
				if h := d.hardware(hm.value[label], "hardware."+label); h != nil {
					r.Hardware[label] = h
				}
			}
		}
	}
	if err := errs.errs.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

func (d *decoder) hardware(n *yaml.Node, path string) *Hardware {
	m := d.mapping(n, path, hardwareFields)
	if m == nil {
		return nil
	}
	h := &Hardware{Pos: d.pos(m.node)}
	if v, ok := m.reqInt("available-cpu-dram-mib"); ok {
		if v <= 0 {
			d.errorf(m.value["available-cpu-dram-mib"], m.field("available-cpu-dram-mib"), "must be > 0, got %d", v)
		}
		h.AvailableCPUDRAMMiB = v
	}
	if v, ok := m.reqInt("gpus-per-node"); ok {
		if v <= 0 || v > 1<<16 {
			d.errorf(m.value["gpus-per-node"], m.field("gpus-per-node"), "must be > 0, got %d", v)
		}
		h.GPUsPerNode = int(v)
	}
	return h
}
