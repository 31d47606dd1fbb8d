package activities

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/cluster"
)

// TestStageRecordsJSON pins the JSON of the stage records recorded in
// workflow histories (now the cluster package's types).
func TestStageRecordsJSON(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{cluster.Allocation{JobID: "j", Nodes: []string{"n1"}, WorkDir: "/w", Backend: "local"}, `{"job_id":"j","nodes":["n1"],"work_dir":"/w","backend":"local"}`},
		{cluster.StageReport{Nodes: 2, FilesCopied: 3, FilesSkipped: 1, BytesCopied: 10, BytesSkipped: 5, Manifest: "ab"},
			`{"nodes":2,"files_copied":3,"files_skipped":1,"bytes_copied":10,"bytes_skipped":5,"manifest_sha256":"ab"}`},
		{cluster.Server{URL: "http://h", Mode: "perf", JobID: "j", Handle: "h1"}, `{"url":"http://h","mode":"perf","job_id":"j","handle":"h1"}`},
		{cluster.Server{URL: "u", Model: "m"}, `{"url":"u","mode":"","job_id":"","handle":"","model":"m"}`},
	} {
		b, err := json.Marshal(tc.v)
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(b))
	}
}
