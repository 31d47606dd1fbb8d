package power

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/energy"
)

// exporter serves DCGM text for gpus GPUs of host at watts.
func exporter(t *testing.T, host string, gpus int, watts float64) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge")
		for g := 0; g < gpus; g++ {
			fmt.Fprintf(w, "DCGM_FI_DEV_POWER_USAGE{gpu=\"%d\",UUID=\"GPU-%s-%d\",Hostname=\"%s\",simulated=\"true\"} %g\n", g, host, g, host, watts)
		}
		fmt.Fprintln(w, "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"x\"} 40")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func settings(t *testing.T, dir string, srvs ...*httptest.Server) srtlaunch.PowerTelemetry {
	s := srtlaunch.PowerTelemetry{Dir: dir, JobID: "7", RunName: "pw_7", Interval: 0.05, StartupTimeout: 5, RequestTimeout: 1,
		JoinTimeout: 10, Required: true, ExporterImage: "dcgm-exporter", ExporterCommand: "dcgm-exporter --collect-interval=100 --address :9401",
		Windows: []srtlaunch.PowerWindow{{BenchmarkType: "sa-bench", Concurrency: 4}}}
	for i, srv := range srvs {
		host, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
		var p int
		fmt.Sscan(port, &p)
		s.Port = p // httptest picks one port per server; the test uses one server per port value
		node := fmt.Sprintf("gb300-%02d", i+1)
		s.Nodes, s.Addrs = append(s.Nodes, node), append(s.Addrs, host)
		for g := 0; g < 2; g++ {
			s.Devices = append(s.Devices, srtlaunch.PowerDevice{Hostname: node, GPUIndex: g,
				Assignments: []srtlaunch.PowerAssignment{{WorkerRole: "agg"}}})
		}
	}
	return s
}

// TestCollector runs a session against one exporter: samples.csv in
// srt-slurm's exact layout (header, \r\n rows, Python float reprs, one row
// per GPU per scrape, the node's name as hostname), readiness once every
// expected GPU reported, and the terminal manifest with a window that the
// samples bracket.
func TestCollector(t *testing.T) {
	srv, hits := exporter(t, "node", 2, 412.5)
	dir := filepath.Join(t.TempDir(), "power")
	s := settings(t, dir, srv)
	c, err := New(s, Options{Version: "test"})
	require.NoError(t, err)
	var m Manifest
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Equal(t, "starting", m.Status)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	started := time.Now()
	go func() {
		ready, err := c.Run(ctx)
		assert.NoError(t, err)
		done <- ready
	}()
	time.Sleep(300 * time.Millisecond)
	// A completed SA-Bench window inside the collection, as the benchmark writes it.
	win := fmt.Sprintf(`{"schema_version": 1, "benchmark_type": "sa-bench", "concurrency": 4, "status": "completed", "benchmark_start_time_unix": %f, "benchmark_end_time_unix": %f}`,
		float64(started.Add(100*time.Millisecond).UnixNano())/1e9, float64(started.Add(250*time.Millisecond).UnixNano())/1e9)
	require.NoError(t, os.WriteFile(filepath.Join(dir, WindowsDir, "results_concurrency_4.json"), []byte(win), 0o644))
	time.Sleep(100 * time.Millisecond)
	cancel()
	require.True(t, <-done, "ready: one scrape covered every expected GPU")

	raw, err := os.ReadFile(filepath.Join(dir, SamplesFile))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\r\n"), "\r\n")
	assert.Equal(t, "schema_version,timestamp_unix,scrape_seq,hostname,gpu_index,gpu_uuid,power_w", lines[0])
	require.GreaterOrEqual(t, len(lines), 1+2*3, "several scrapes")
	f := strings.Split(lines[1], ",")
	assert.Equal(t, []string{"1", "0", "gb300-01", "0", "GPU-node-0", "412.5"}, []string{f[0], f[2], f[3], f[4], f[5], f[6]})
	assert.Contains(t, f[1], ".", "timestamps are Python float reprs")
	assert.Equal(t, "1", strings.Split(lines[2], ",")[0])
	assert.Equal(t, "1", strings.Split(lines[2], ",")[4], "the second GPU of the same scrape")
	rows, reasons, err := energy.ReadSamples(filepath.Join(dir, SamplesFile))
	require.NoError(t, err)
	assert.Empty(t, reasons)
	assert.Equal(t, int(hits.Load())*2, len(rows), "every scrape's rows persisted")

	data, err = os.ReadFile(filepath.Join(dir, ManifestFile))
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(data), "}\n"))
	assert.Contains(t, string(data), `"sample_interval_seconds": 0.05,`)
	assert.Contains(t, string(data), `"request_timeout_seconds": 1.0,`, "floats as Python writes them")
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Equal(t, "complete", m.Status)
	require.NotNil(t, m.PublicationValid)
	assert.True(t, *m.PublicationValid, "%v", m.ReasonCodes)
	assert.True(t, m.Simulated, "the exporter's simulated label is carried into the manifest")
	assert.Equal(t, len(rows), m.SampleRowCount)
	require.Len(t, m.ObservedDevices, 2)
	assert.Equal(t, []string{"GPU-node-1"}, m.ObservedDevices[1].GPUUUIDs)
	require.Len(t, m.WindowValidations, 1)
	assert.True(t, m.WindowValidations[0].Valid, "%v", m.WindowValidations[0].Reasons)
	assert.Equal(t, "windows/results_concurrency_4.json", *m.WindowValidations[0].WindowFile)
}

// TestCollectorInvalid: an exporter that reports other GPUs than the
// workers hold and no measurement window: a required session fails its
// startup, and nothing is publishable.
func TestCollectorInvalid(t *testing.T) {
	srv, _ := exporter(t, "node", 1, 100)
	dir := filepath.Join(t.TempDir(), "power")
	s := settings(t, dir, srv)
	s.StartupTimeout = 0.2
	c, err := New(s, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	ready, err := c.Run(ctx)
	require.NoError(t, err)
	assert.False(t, ready, "GPU 1 never reported")
	var m Manifest
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	assert.Equal(t, "failed", m.Status, "required and never ready")
	assert.False(t, *m.PublicationValid)
	assert.Subset(t, m.ReasonCodes, []string{ReasonStartupTimeout, ReasonExpectedMissing, ReasonWindowMissing})
}

func TestParseScrape(t *testing.T) {
	body := `# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b"} 200.25
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 100
DCGM_FI_DEV_POWER_USAGE{gpu="2",UUID="GPU-c"} 1
DCGM_FI_DEV_POWER_USAGE{gpu="2",UUID="GPU-c2"} 2
DCGM_FI_DEV_POWER_USAGE{gpu="3",UUID=""} 5
DCGM_FI_DEV_POWER_USAGE{gpu="4",UUID="GPU-e",GPU_I_ID="1"} 5
DCGM_FI_DEV_POWER_USAGE{UUID="GPU-f"} 5
DCGM_FI_DEV_POWER_USAGE{gpu="6",UUID="GPU-g"} -3
`
	rs, reasons, sim := ParseScrape([]byte(body))
	assert.Equal(t, []Reading{{0, "GPU-a", 100}, {1, "GPU-b", 200.25}}, rs, "sorted by GPU; a duplicated GPU dropped")
	assert.ElementsMatch(t, []string{ReasonGPUUUIDMissing, ReasonMIG, ReasonGPUIndexMissing, ReasonInvalidPower, ReasonDuplicateMetric}, reasons)
	assert.False(t, sim)
	_, reasons, _ = ParseScrape([]byte("up 1\n"))
	assert.Equal(t, []string{ReasonMetricMissing}, reasons)
	_, reasons, _ = ParseScrape([]byte("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\" 1\n"))
	assert.Equal(t, []string{ReasonEndpointParse}, reasons)
}
