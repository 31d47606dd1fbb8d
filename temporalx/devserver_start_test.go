package temporalx

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sweepflow/sweepflow/internal/prereq"
	"github.com/sweepflow/sweepflow/internal/testnet"
)

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
