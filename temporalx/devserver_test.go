package temporalx

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDevServerArgs(t *testing.T) {
	base := DevServer{Binary: "temporal", DataDir: "/data", IP: "127.0.0.1", Port: 7233, UIPort: 8233,
		SearchAttributes: map[string]string{"B": "Int", "A": "Keyword"}}
	tests := []struct {
		name    string
		mod     func(*DevServer)
		want    []string
		wantNot []string
	}{
		{name: "tuned by default", mod: func(*DevServer) {},
			want: []string{"--sqlite-pragma journal_mode=wal", "--sqlite-pragma synchronous=1",
				"--dynamic-config-value system.enableActivityEagerExecution=true",
				"--dynamic-config-value matching.numTaskqueueReadPartitions=1",
				"--search-attribute A=Keyword --search-attribute B=Int", "--db-filename /data/temporal.db"},
			wantNot: []string{"--headless"}},
		{name: "stock", mod: func(d *DevServer) { d.Stock = true },
			wantNot: []string{"--sqlite-pragma", "--dynamic-config-value"}},
		{name: "headless with extra dynamic config", mod: func(d *DevServer) {
			d.Headless = true
			d.DynamicConfig = []string{"matching.numTaskqueueReadPartitions=4"}
		}, want: []string{"--headless", "--dynamic-config-value matching.numTaskqueueReadPartitions=4"}},
		{name: "metrics and an extra pragma", mod: func(d *DevServer) {
			d.MetricsPort = 9090
			d.Pragmas = []string{"cache_size=-65536"}
		}, want: []string{"--metrics-port 9090", "--sqlite-pragma cache_size=-65536"}},
		{name: "no metrics port unless asked", mod: func(*DevServer) {}, wantNot: []string{"--metrics-port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := base
			tt.mod(&d)
			line := strings.Join(d.Args(), " ")
			assert.True(t, strings.HasPrefix(line, "server start-dev --ip 127.0.0.1 --port 7233"), line)
			for _, w := range tt.want {
				assert.Contains(t, line, w)
			}
			for _, w := range tt.wantNot {
				assert.NotContains(t, line, w)
			}
		})
	}
	// Extra values come after the tuned ones.
	d := base
	d.DynamicConfig = []string{"matching.numTaskqueueReadPartitions=4"}
	line := strings.Join(d.Args(), " ")
	assert.Less(t, strings.Index(line, "numTaskqueueReadPartitions=1"), strings.Index(line, "numTaskqueueReadPartitions=4"))
}
