package matrix

import "bytes"

// EncodeIXJSON renders rows as InferenceX prints them: Python json.dumps
// with ", " and ": " separators (indent 0), or json.dumps(indent=N) as the
// expected-matrix reference files are written. No trailing newline.
func EncodeIXJSON(rows []*Row, indent int) ([]byte, error) {
	items := make([]any, len(rows))
	for i, r := range rows {
		items[i] = r.Fields
	}
	o := encOptions{itemSep: ", ", keySep: ": "}
	if indent > 0 {
		o = encOptions{itemSep: ",", keySep: ": ", indent: indent}
	}
	var b bytes.Buffer
	if err := encode(&b, items, o, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EncodeCompact renders v (Objects, lists and scalars) as InferenceX's
// changelog planner prints its bucket object, pydantic's compact JSON (","
// and ":" without spaces), or with indent > 0 in json.dumps(indent=N)
// layout. No trailing newline.
func EncodeCompact(v any, indent int) ([]byte, error) {
	o := encOptions{itemSep: ",", keySep: ":"}
	if indent > 0 {
		o = encOptions{itemSep: ",", keySep: ": ", indent: indent}
	}
	var b bytes.Buffer
	if err := encode(&b, v, o, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// SeqLenName is the name InferenceX files a fixed-seq-len row under
// ("1k1k", "8k1k", else "<isl>_<osl>").
func (r *Row) SeqLenName() string { return seqLenName(r.Int("isl"), r.Int("osl")) }
