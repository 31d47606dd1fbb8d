package cluster

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStageRecordsJSON pins the JSON of the stage records recorded in
// workflow histories (the stage activities' inputs and outputs).
func TestStageRecordsJSON(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{Allocation{JobID: "j", Nodes: []string{"n1"}, WorkDir: "/w", Backend: "local"}, `{"job_id":"j","nodes":["n1"],"work_dir":"/w","backend":"local"}`},
		{StageReport{Nodes: 2, FilesCopied: 3, FilesSkipped: 1, BytesCopied: 10, BytesSkipped: 5, Manifest: "ab"},
			`{"nodes":2,"files_copied":3,"files_skipped":1,"bytes_copied":10,"bytes_skipped":5,"manifest_sha256":"ab"}`},
		{Server{URL: "http://h", Mode: "perf", JobID: "j", Handle: "h1"}, `{"url":"http://h","mode":"perf","job_id":"j","handle":"h1"}`},
		{Server{URL: "u", Model: "m"}, `{"url":"u","mode":"","job_id":"","handle":"","model":"m"}`},
	} {
		b, err := json.Marshal(tc.v)
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(b))
	}
}
