package simrole

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMounts(t *testing.T) {
	m, err := ParseMounts(`{"/logs": "/srv/job/logs", "/infmax-workspace": "/srv/ix", "/infmax-workspace/results": "/srv/results"}`)
	require.NoError(t, err)
	tests := []struct{ in, want string }{
		{"/logs/nginx.conf", "/srv/job/logs/nginx.conf"},
		{"/logs", "/srv/job/logs"},
		{"/logsother/x", "/logsother/x"},
		{"/infmax-workspace/a_conc4.json", "/srv/ix/a_conc4.json"},
		{"/infmax-workspace/results/x.json", "/srv/results/x.json"},
		{"/model/config.json", "/model/config.json"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, m.Host(tc.in), tc.in)
	}
	_, err = ParseMounts(`["/logs"]`)
	assert.ErrorContains(t, err, EnvMounts)
	_, err = ParseMounts(`{"logs": "/x"}`)
	assert.ErrorContains(t, err, "must be absolute")
}
