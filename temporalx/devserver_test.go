package temporalx

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/internal/testnet"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
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

// TestOwnDevServerStarts runs sweepflow-devserver as `starter server start`
// does: it serves the frontend and the UI, registers the search attributes
// it was given, applies the tuning flags, and serves metrics only when asked.
func TestOwnDevServerStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts a dev server")
	}
	wd, _ := os.Getwd()
	bin, own, err := DevServerPath(wd)
	if err != nil || !own {
		prereq.Missingf(t, "%s is not built (found %q, %v); scripts/install-temporal.sh builds it", DevServerBinary, bin, err)
	}
	d := DevServer{Binary: bin, DataDir: t.TempDir(), IP: "127.0.0.1", Port: testnet.FreePort(t), UIPort: testnet.FreePort(t),
		MetricsPort: testnet.FreePort(t), SearchAttributes: map[string]string{"SweepID": "Keyword", "Concurrency": "Int"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, started, err := d.Start(ctx)
	require.NoError(t, err)
	require.True(t, started)
	t.Cleanup(func() { assert.NoError(t, d.Stop()) })

	c, err := client.Dial(client.Options{HostPort: d.Address()})
	require.NoError(t, err)
	defer c.Close()
	sa, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	assert.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, sa.GetCustomAttributes()["SweepID"])
	assert.Equal(t, enums.INDEXED_VALUE_TYPE_INT, sa.GetCustomAttributes()["Concurrency"])

	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		require.NoError(t, err, url)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get(d.UIURL() + "/")
	assert.Equal(t, http.StatusOK, code, "the Web UI")
	code, body := get("http://127.0.0.1:" + strconv.Itoa(d.MetricsPort) + "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "service_requests", "--metrics-port serves the server's metrics")
	assert.FileExists(t, filepath.Join(d.DataDir, "temporal.db"), "--db-filename: the SQLite file in the data directory")
}
