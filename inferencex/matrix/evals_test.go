package matrix

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/inferencex/ixconfig"
)

// TestAllEvalRows: under all-evals the seed's multinode agentic rows get
// one eval per parallelism key at its highest conc, with no minimum: the
// three 2P1D rows (one recipe) merge into one row at c1280, the others
// keep their own.
func TestAllEvalRows(t *testing.T) {
	m, err := ixconfig.LoadMaster("../../configs/dsv4-gb200-agentx.yaml")
	require.NoError(t, err)
	r, err := ixconfig.LoadRunners("../../configs/runners.yaml")
	require.NoError(t, err)
	rows, err := Generate(m, r, Options{Keys: m.Keys()})
	require.NoError(t, err)
	require.Len(t, rows, 8)

	out := AllEvalRows(rows)
	require.Len(t, out, 6)
	var evalConcs, concs [][]int
	for _, row := range out {
		evalConcs = append(evalConcs, EvalConcs(row))
		concs = append(concs, row.Conc())
		v, _ := row.Fields.Get("eval-only")
		assert.Equal(t, true, v)
		v, _ = row.Fields.Get("run-eval")
		assert.Equal(t, true, v)
	}
	assert.Equal(t, [][]int{{1}, {4}, {64}, {128}, {256}, {1280}}, evalConcs)
	assert.Equal(t, []int{768, 1024, 1280}, concs[5], "the 2P1D rows merge into one")
	for _, row := range rows {
		_, has := row.Fields.Get("eval-only")
		assert.False(t, has, "the input rows are not modified")
	}
}
