package workers

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClusterQueue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{name: "profile's task-queue", o: Options{ClusterName: "local-sim", TaskQueue: "gb200-rack-7"}, want: "gb200-rack-7"},
		{name: "no task-queue: derived from the name", o: Options{ClusterName: "local-sim"}, want: "cluster-local-sim"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.o.clusterQueue(), tt.name)
	}
}
