package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MatrixRow is the part of an InferenceX generated matrix row (multinode
// form) that decides how the simulated engine behaves. Other row fields are
// ignored.
type MatrixRow struct {
	Model        string     `json:"model"`
	SpecDecoding string     `json:"spec-decoding"`
	Disagg       bool       `json:"disagg"`
	ExpName      string     `json:"exp-name"`
	Prefill      *RowWorker `json:"prefill"`
	Decode       *RowWorker `json:"decode"`
}

// RowWorker is a row's prefill or decode block.
type RowWorker struct {
	NumWorker          int      `json:"num-worker"`
	TP                 int      `json:"tp"`
	EP                 int      `json:"ep"`
	DPAttn             bool     `json:"dp-attn"`
	AdditionalSettings []string `json:"additional-settings"`
}

// LoadMatrixRow reads one row from path: a JSON object, or element index of
// a JSON array (an InferenceX expected-matrix file). Errors name the file,
// the line and the field.
func LoadMatrixRow(path string, index int) (MatrixRow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return MatrixRow{}, err
	}
	row, err := ParseMatrixRow(data, index)
	if err != nil {
		return MatrixRow{}, fmt.Errorf("%s:%w", path, err)
	}
	return row, nil
}

// fieldName qualifies a field with the array element it belongs to.
func fieldName(prefix, field string) string {
	if prefix == "" {
		return field
	}
	return prefix + "." + field
}

// rowError is "LINE: field F: msg", so a caller can prefix the file name.
func rowError(data []byte, offset int64, field, msg string) error {
	line := 1 + bytes.Count(data[:min(int(offset), len(data))], []byte("\n"))
	if field == "" {
		return fmt.Errorf("%d: %s", line, msg)
	}
	return fmt.Errorf("%d: field %s: %s", line, field, msg)
}

// ParseMatrixRow decodes a row (see LoadMatrixRow) and checks the fields
// the simulator needs. The error text starts with the line number.
func ParseMatrixRow(data []byte, index int) (MatrixRow, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	prefix := ""
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var rows []json.RawMessage
		if err := json.Unmarshal(data, &rows); err != nil {
			return MatrixRow{}, jsonError(data, err, "")
		}
		if index < 0 || index >= len(rows) {
			return MatrixRow{}, rowError(data, 0, "", fmt.Sprintf("file holds %d rows; row index %d is out of range", len(rows), index))
		}
		prefix = "[" + strconv.Itoa(index) + "]"
	} else if index > 0 {
		return MatrixRow{}, rowError(data, 0, "", fmt.Sprintf("file holds one row object; row index %d is out of range", index))
	}
	var offsets map[string]int64 // computed only when an error needs a line
	at := func(field string) int64 {
		if offsets == nil {
			offsets = jsonKeyOffsets(data)
		}
		if off, ok := offsets[prefix+field]; ok {
			return off
		}
		return offsets[prefix]
	}
	var row MatrixRow
	var err error
	if prefix != "" {
		var rows []MatrixRow
		err = json.Unmarshal(data, &rows)
		if err == nil {
			row = rows[index]
		}
	} else {
		err = json.Unmarshal(data, &row)
	}
	if err != nil {
		return MatrixRow{}, jsonError(data, err, prefix)
	}
	if row.Prefill == nil {
		return MatrixRow{}, rowError(data, at(""), fieldName(prefix, "prefill"), "missing (the simulator needs a multinode row with prefill and decode blocks)")
	}
	if row.Decode == nil {
		return MatrixRow{}, rowError(data, at(""), fieldName(prefix, "decode"), "missing (aggregated rows use decode num-worker 0)")
	}
	for _, w := range []struct {
		name string
		w    *RowWorker
	}{{"prefill", row.Prefill}, {"decode", row.Decode}} {
		if w.w.NumWorker < 0 {
			return MatrixRow{}, rowError(data, at("."+w.name+".num-worker"), fieldName(prefix, w.name+".num-worker"), "must be >= 0")
		}
		if w.w.TP < 1 {
			return MatrixRow{}, rowError(data, at("."+w.name+".tp"), fieldName(prefix, w.name+".tp"), "must be >= 1")
		}
		if w.w.EP < 1 {
			return MatrixRow{}, rowError(data, at("."+w.name+".ep"), fieldName(prefix, w.name+".ep"), "must be >= 1")
		}
	}
	if row.Prefill.NumWorker < 1 {
		return MatrixRow{}, rowError(data, at(".prefill.num-worker"), fieldName(prefix, "prefill.num-worker"), "must be >= 1")
	}
	if _, _, err := row.syntheticAL(); err != nil {
		return MatrixRow{}, rowError(data, at(".prefill.additional-settings"), fieldName(prefix, "additional-settings"), err.Error())
	}
	return row, nil
}

// Deployment converts the row's worker blocks. As in InferenceX, decode
// num-worker 0 means an aggregated deployment (the recipe decides), even
// when the row says disagg: true.
func (r MatrixRow) Deployment(gpusPerNode int) Deployment {
	d := Deployment{
		PrefillWorkers: r.Prefill.NumWorker, PrefillTP: r.Prefill.TP, PrefillEP: r.Prefill.EP, PrefillDPA: r.Prefill.DPAttn,
		DecodeWorkers: r.Decode.NumWorker, DecodeTP: r.Decode.TP, DecodeEP: r.Decode.EP, DecodeDPA: r.Decode.DPAttn,
		Disagg: r.Disagg && r.Decode.NumWorker > 0, GPUsPerNode: gpusPerNode,
	}
	if !d.Disagg {
		d.DecodeWorkers = 0
	}
	return d
}

// SyntheticAcceptanceLength returns SYNTHETIC_ACCEPTANCE_LENGTH from the
// row's additional-settings when SYNTHETIC_ACCEPTANCE=true is also set, the
// way InferenceX injects a golden acceptance length into perf runs.
func (r MatrixRow) SyntheticAcceptanceLength() (float64, bool) {
	al, ok, _ := r.syntheticAL()
	return al, ok
}

func (r MatrixRow) syntheticAL() (float64, bool, error) {
	settings := map[string]string{}
	for _, w := range []*RowWorker{r.Prefill, r.Decode} {
		if w == nil {
			continue
		}
		for _, kv := range w.AdditionalSettings {
			k, v, _ := strings.Cut(kv, "=")
			settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return SyntheticAcceptanceFromEnv(func(k string) string { return settings[k] })
}

// SyntheticAcceptanceFromEnv reads SYNTHETIC_ACCEPTANCE / _LENGTH through
// getenv (os.Getenv or a row's settings).
func SyntheticAcceptanceFromEnv(getenv func(string) string) (float64, bool, error) {
	if !strings.EqualFold(getenv("SYNTHETIC_ACCEPTANCE"), "true") {
		return 0, false, nil
	}
	s := getenv("SYNTHETIC_ACCEPTANCE_LENGTH")
	if s == "" {
		return 0, false, errors.New("SYNTHETIC_ACCEPTANCE=true but SYNTHETIC_ACCEPTANCE_LENGTH is not set")
	}
	al, err := strconv.ParseFloat(s, 64)
	if err != nil || al < 1 {
		return 0, false, fmt.Errorf("SYNTHETIC_ACCEPTANCE_LENGTH=%q is not a number >= 1", s)
	}
	return al, true, nil
}

// jsonError turns a decoding error into "LINE: field F: msg".
func jsonError(data []byte, err error, prefix string) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return rowError(data, syn.Offset, "", "invalid JSON: "+syn.Error())
	case errors.As(err, &typ):
		return rowError(data, typ.Offset, fieldName(prefix, typ.Field), fmt.Sprintf("expected %s, got JSON %s", typ.Type, typ.Value))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return rowError(data, int64(len(data)), "", "invalid JSON: unexpected end of file")
	}
	return rowError(data, 0, "", err.Error())
}

// jsonKeyOffsets maps key paths ("[0].prefill.tp", ".decode.ep", "" for
// the root) to the byte offset where each key or element starts, so
// semantic errors can name a line.
func jsonKeyOffsets(data []byte) map[string]int64 {
	out := map[string]int64{}
	dec := json.NewDecoder(bytes.NewReader(data))
	// InputOffset points just after the previous token; skip separators so
	// the offset lands on the key itself.
	pos := func() int64 {
		off := dec.InputOffset()
		for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
			off++
		}
		return off
	}
	var walk func(path string) error
	walk = func(path string) error {
		if _, seen := out[path]; !seen {
			out[path] = pos()
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				off := pos()
				k, err := dec.Token()
				if err != nil {
					return err
				}
				ks, _ := k.(string)
				out[path+"."+ks] = off
				if err := walk(path + "." + ks); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(path + "[" + strconv.Itoa(i) + "]"); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	_ = walk("")
	return out
}
