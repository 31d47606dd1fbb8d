// Package config loads sweepflow's own files: sweep files, cluster profiles
// and srt-slurm recipes. Loading is strict: every problem is reported as
// "FILE:LINE: FIELD: what was expected" and nothing is returned half-valid.
// InferenceX's own formats (master configs, the runners file, the perf
// changelog) are loaded by inferencex/ixconfig.
package config

import "github.com/sweepflow/sweepflow/config/strictyaml"

// decoder is the shared strict decoder with this package's schemas as methods.
type decoder struct{ *strictyaml.Decoder }
