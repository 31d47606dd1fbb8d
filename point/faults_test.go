package point

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFaults(t *testing.T) {
	points := []string{"dsv4_agg_c64", "dsv4_agg_c640", "dsv4_disagg_c128"}
	tests := []struct {
		name    string
		specs   []string
		want    map[string][]Fault
		wantErr string
	}{
		{name: "none", specs: nil, want: map[string][]Fault{}},
		{name: "exact name with times", specs: []string{"dsv4_agg_c64:perf:2"},
			want: map[string][]Fault{"dsv4_agg_c64": {{Stage: StagePerf, Times: 2}}}},
		{name: "exact name beats a longer name containing it", specs: []string{"dsv4_agg_c64:eval"},
			want: map[string][]Fault{"dsv4_agg_c64": {{Stage: StageEval, Times: faultForever}}}},
		{name: "unique substring", specs: []string{"disagg:bringup:1"},
			want: map[string][]Fault{"dsv4_disagg_c128": {{Stage: StageBringUp, Times: 1}}}},
		{name: "several faults on one point", specs: []string{"c640:allocate:1", "c640:upload:3"},
			want: map[string][]Fault{"dsv4_agg_c640": {{Stage: StageAllocate, Times: 1}, {Stage: StageUpload, Times: 3}}}},
		{name: "no stage", specs: []string{"c128"}, wantErr: `--inject-fault "c128": want POINT:STAGE[:TIMES]`},
		{name: "too many parts", specs: []string{"c128:perf:1:2"}, wantErr: "want POINT:STAGE[:TIMES]"},
		{name: "zero times", specs: []string{"c128:perf:0"}, wantErr: "TIMES must be a positive integer"},
		{name: "text times", specs: []string{"c128:perf:x"}, wantErr: "TIMES must be a positive integer"},
		{name: "unknown stage", specs: []string{"c128:teardown"}, wantErr: `unknown stage "teardown" (want one of allocate, checkpoint,`},
		{name: "ambiguous point", specs: []string{"agg:perf"}, wantErr: `--inject-fault "agg:perf": point "agg" matches 3 points`},
		{name: "unknown point", specs: []string{"gb300:perf"}, wantErr: `point "gb300" matches 0 points`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFaults(tc.specs, points)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
