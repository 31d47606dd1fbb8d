// Package ixconfig loads InferenceX's own file formats the way InferenceX
// reads them: master configs (the benchmark matrix), the runners file and the
// perf changelog. Every entry is validated, not only those a sweep selects;
// every problem is reported as "FILE:LINE: FIELD: what was expected" and
// nothing is returned half-valid.
package ixconfig

import "github.com/sweepflow/sweepflow/config/strictyaml"

// decoder is the shared strict decoder with the InferenceX schemas as methods.
type decoder struct{ *strictyaml.Decoder }
