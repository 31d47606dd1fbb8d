package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/sim"
)

func TestSimServeFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	row := filepath.Join(dir, "row.json")
	require.NoError(t, os.WriteFile(row, []byte(`{
  "model": "deepseek-ai/DeepSeek-V4-Pro",
  "spec-decoding": "mtp",
  "disagg": true,
  "prefill": {"num-worker": 2, "tp": 16, "ep": 16, "dp-attn": true,
              "additional-settings": ["SYNTHETIC_ACCEPTANCE=true", "SYNTHETIC_ACCEPTANCE_LENGTH=3.77"]},
  "decode": {"num-worker": 1, "tp": 32, "ep": 32, "dp-attn": true}
}`), 0o644))
	noAL := filepath.Join(dir, "noal.json")
	require.NoError(t, os.WriteFile(noAL, []byte(`{"spec-decoding": "mtp", "prefill": {"num-worker": 1, "tp": 8, "ep": 1}, "decode": {"num-worker": 0, "tp": 8, "ep": 1}}`), 0o644))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{\n  \"prefill\": {\"num-worker\": 1, \"tp\": 0, \"ep\": 1},\n  \"decode\": {\"num-worker\": 1, \"tp\": 8, \"ep\": 1}}"), 0o644))
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name    string
		args    []string
		env     func(string) string
		dep     string
		al      float64
		model   string
		fast    bool
		wantErr string
	}{
		{name: "default deployment", args: nil, dep: "2P1D DEP16/DEP32", al: 1, model: ""},
		{name: "shorthand", args: []string{"--deployment", "1P1D DEP8/DEP16", "--acceptance-length", "2.49"}, dep: "1P1D DEP8/DEP16", al: 2.49},
		{name: "explicit numbers agg", args: []string{"--prefill-tp", "8"}, dep: "TP8 agg", al: 1},
		{name: "explicit numbers disagg", args: []string{"--prefill-workers", "2", "--prefill-tp", "16", "--prefill-ep", "16", "--prefill-dpa",
			"--decode-workers", "1", "--decode-tp", "32", "--decode-ep", "32", "--decode-dpa"}, dep: "2P1D DEP16/DEP32", al: 1},
		{name: "row json with synthetic AL and model", args: []string{"--row-json", row}, dep: "2P1D DEP16/DEP32", al: 3.77, model: "deepseek-ai/DeepSeek-V4-Pro"},
		{name: "env AL beats row", args: []string{"--row-json", row}, env: env("SYNTHETIC_ACCEPTANCE", "true", "SYNTHETIC_ACCEPTANCE_LENGTH", "2.51"), dep: "2P1D DEP16/DEP32", al: 2.51, model: "deepseek-ai/DeepSeek-V4-Pro"},
		{name: "flag AL beats env", args: []string{"--acceptance-length", "1.84"}, env: env("SYNTHETIC_ACCEPTANCE", "true", "SYNTHETIC_ACCEPTANCE_LENGTH", "2.51"), dep: "2P1D DEP16/DEP32", al: 1.84},
		{name: "env AL ignored unless SYNTHETIC_ACCEPTANCE=true", args: nil, env: env("SYNTHETIC_ACCEPTANCE_LENGTH", "2.51"), dep: "2P1D DEP16/DEP32", al: 1},
		{name: "row mtp without AL", args: []string{"--row-json", noAL, "--model", "m"}, dep: "TP8 agg", al: 1, model: "m"},
		{name: "fast mode", args: []string{"--ttft-ms", "0", "--itl-ms", "0"}, dep: "2P1D DEP16/DEP32", al: 1, fast: true},
		{name: "two deployment sources", args: []string{"--deployment", "TP8 agg", "--prefill-tp", "8"}, wantErr: "one way"},
		{name: "bad shorthand", args: []string{"--deployment", "3Q DEP8"}, wantErr: "cannot read parallelism"},
		{name: "bad row", args: []string{"--row-json", bad}, wantErr: bad + ":2: field prefill.tp: must be >= 1"},
		{name: "missing row", args: []string{"--row-json", filepath.Join(dir, "nope.json")}, wantErr: "no such file"},
		{name: "explicit without tp", args: []string{"--decode-workers", "1"}, wantErr: "--prefill-tp is required"},
		{name: "bad AL", args: []string{"--acceptance-length", "0.5"}, wantErr: ">= 1"},
		{name: "bad env AL", env: env("SYNTHETIC_ACCEPTANCE", "true", "SYNTHETIC_ACCEPTANCE_LENGTH", "x"), wantErr: "SYNTHETIC_ACCEPTANCE_LENGTH"},
		{name: "bad time scale", args: []string{"--time-scale", "0"}, wantErr: "--time-scale"},
		{name: "stray argument", args: []string{"serve"}, wantErr: `unexpected argument "serve"`},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "unknown flag: --nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			getenv := tc.env
			if getenv == nil {
				getenv = env()
			}
			cfg, _, err := simConfigFromFlags(tc.args, io.Discard, getenv)
			if tc.wantErr != "" {
				require.Error(t, err)
				var ee *exitError
				require.True(t, errors.As(err, &ee))
				assert.Equal(t, 2, ee.code)
				assert.Contains(t, ee.msg, tc.wantErr)
				assert.NotContains(t, ee.msg, "\n")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.dep, cfg.Deployment.String())
			assert.Equal(t, tc.al, cfg.AcceptanceLength)
			assert.Equal(t, tc.model, cfg.Model)
			assert.Equal(t, tc.fast, cfg.FastMode)
			_, err = sim.New(cfg)
			require.NoError(t, err, "flags give a valid engine config")
		})
	}
}
