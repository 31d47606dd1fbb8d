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
