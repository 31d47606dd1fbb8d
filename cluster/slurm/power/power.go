// Package power is the head-node collector of DCGM power telemetry
// (telemetry provider dcgm-power): srt-slurm's orchestrator runs it in its
// telemetry stage (srt-slurm v1.0.68, c88ef731: cli/mixins/telemetry_stage.py
// start_power_telemetry, core/power/session.py, samples.py, manifest.py,
// topology.py). It polls every worker node's DCGM exporter at a fixed
// cadence and writes, below the bring-up's log directory,
// <storage_subdir>/samples.csv (one row per GPU per scrape) and
// manifest.json (producer, topology, lifecycle state, validity) in
// srt-slurm's artifact format, schema version 1. sweepflow runs it as a
// step on the head node (`starter power collect`), the host srt-slurm's
// orchestrator runs on, so sample and benchmark timestamps share a clock.
package power

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sweepflow/sweepflow/cluster/slurm/srtlaunch"
	"github.com/sweepflow/sweepflow/energy"
	"github.com/sweepflow/sweepflow/internal/atomicfile"
	"github.com/sweepflow/sweepflow/internal/pyjson"
)

// The artifact contract (core/power/contract.py).
const (
	SchemaVersion    = 1
	Producer         = "sweepflow.dcgm-power" // srt-slurm writes srt-slurm.dcgm-power
	PowerMetric      = "DCGM_FI_DEV_POWER_USAGE"
	PowerUnit        = "W"
	PowerScope       = "gpu_device_board_as_reported_by_dcgm"
	ClockSource      = "head_node_unix_clock"
	ManifestFile     = "manifest.json"
	SamplesFile      = "samples.csv"
	WindowsDir       = "windows"
	maxSampleGap     = 3.0 // seconds between a device's samples in a window
	cycleGrace       = time.Second
	statusStarting   = "starting"
	statusRunning    = "running"
	statusComplete   = "complete"
	statusIncomplete = "incomplete"
	statusFailed     = "failed"
)

// Reason codes recorded in the manifest (contract.py Reason).
const (
	ReasonStartupTimeout    = "exporter_startup_timeout"
	ReasonEndpointTimeout   = "endpoint_timeout"
	ReasonEndpointHTTP      = "endpoint_http_error"
	ReasonEndpointParse     = "endpoint_parse_error"
	ReasonMetricMissing     = "power_metric_missing"
	ReasonDuplicateMetric   = "duplicate_power_metric"
	ReasonGPUIndexMissing   = "gpu_index_missing"
	ReasonGPUUUIDMissing    = "gpu_uuid_missing"
	ReasonInvalidPower      = "invalid_power_value"
	ReasonMIG               = "mig_instance_unsupported"
	ReasonUnexpectedDevice  = "unexpected_device"
	ReasonExpectedMissing   = "expected_device_missing"
	ReasonUUIDChanged       = "gpu_uuid_changed"
	ReasonNonMonotonic      = "timestamp_non_monotonic"
	ReasonSamplesMalformed  = "samples_csv_malformed"
	ReasonCollector         = "collector_exception"
	ReasonWindowMissing     = "measurement_window_missing"
	ReasonWindowMalformed   = "measurement_window_malformed"
	ReasonWindowIncomplete  = "measurement_window_incomplete"
	ReasonWindowNotBracket  = "measurement_window_not_bracketed"
	ReasonSampleGapExceeded = "sample_gap_exceeded"
)

// ObservedDevice is a device as the samples show it.
type ObservedDevice struct {
	Hostname  string   `json:"hostname"`
	GPUIndex  int      `json:"gpu_index"`
	GPUUUIDs  []string `json:"gpu_uuids"`
	FirstUnix pyFloat  `json:"first_sample_time_unix"`
	LastUnix  pyFloat  `json:"last_sample_time_unix"`
	times     []float64
}

// ExporterIdentity is the manifest's dcgm_exporter block.
type ExporterIdentity struct {
	Image  string  `json:"container_image_resolved"`
	SHA256 *string `json:"container_image_sha256"`
	Port   int     `json:"port"`
	Cmd    string  `json:"command"`
}

// WindowValidation is one expected window's coverage audit.
type WindowValidation struct {
	BenchmarkType string             `json:"benchmark_type"`
	Concurrency   int                `json:"concurrency"`
	WindowFile    *string            `json:"window_file"`
	Valid         bool               `json:"power_coverage_valid"`
	Reasons       []string           `json:"reason_codes"`
	MaxGap        map[string]pyFloat `json:"per_device_max_sample_gap_seconds"`
}

// Manifest is manifest.json, field for field as manifest.py's to_dict.
type Manifest struct {
	SchemaVersion     int                     `json:"schema_version"`
	Producer          string                  `json:"producer"`
	ProducerVersion   string                  `json:"producer_version"`
	ProducerCommit    *string                 `json:"producer_git_commit"`
	SourceMetric      string                  `json:"source_metric"`
	Unit              string                  `json:"unit"`
	PowerScope        string                  `json:"power_scope"`
	TimestampSource   string                  `json:"timestamp_source"`
	JobID             string                  `json:"job_id"`
	RunName           string                  `json:"run_name"`
	SampleInterval    pyFloat                 `json:"sample_interval_seconds"`
	RequestTimeout    pyFloat                 `json:"request_timeout_seconds"`
	MaxScrapeDuration *pyFloat                `json:"max_scrape_duration_seconds"`
	Required          bool                    `json:"required"`
	StartedAt         pyFloat                 `json:"started_at_unix"`
	StoppedAt         *pyFloat                `json:"stopped_at_unix"`
	Status            string                  `json:"status"`
	PublicationValid  *bool                   `json:"publication_valid"`
	Exporter          ExporterIdentity        `json:"dcgm_exporter"`
	ExpectedDevices   []srtlaunch.PowerDevice `json:"expected_devices"`
	ObservedDevices   []ObservedDevice        `json:"observed_devices"`
	ExpectedWindows   []srtlaunch.PowerWindow `json:"expected_windows"`
	ScrapeCount       int                     `json:"scrape_count"`
	SampleRowCount    int                     `json:"sample_row_count"`
	WindowValidations []WindowValidation      `json:"window_validations"`
	ArtifactErrors    []map[string]any        `json:"artifact_errors"`
	ReasonCodes       []string                `json:"reason_codes"`
	Simulated         bool                    `json:"simulated,omitempty"` // the exporters said their readings are simulated
}

// pyFloat marshals like Python's json.dumps writes a float (1.0, not 1).
type pyFloat float64

func (f pyFloat) MarshalJSON() ([]byte, error) { return []byte(pyjson.FloatRepr(float64(f))), nil }

// Options are what a collection runs with besides its settings.
type Options struct {
	Version string    // producer_version
	Log     io.Writer // progress lines
	Now     func() time.Time
	Client  *http.Client
}

// Collector is one power session.
type Collector struct {
	s    srtlaunch.PowerTelemetry
	o    Options
	man  Manifest
	mu   sync.Mutex
	file *os.File
	w    *csv.Writer
	seq  int
	rsn  []string
	sim  bool
}

// New creates the power directory, samples.csv with its header and the
// `starting` manifest (PowerTelemetrySession.initialize).
func New(s srtlaunch.PowerTelemetry, o Options) (*Collector, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: time.Duration(s.RequestTimeout * float64(time.Second))}
	}
	if len(s.Nodes) == 0 || len(s.Addrs) != len(s.Nodes) || s.Interval <= 0 || s.Port <= 0 {
		return nil, fmt.Errorf("power: settings need nodes with addresses, an exporter port and a positive interval")
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, WindowsDir), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(s.Dir, SamplesFile))
	if err != nil {
		return nil, err
	}
	c := &Collector{s: s, o: o, file: f, w: csv.NewWriter(f)}
	c.w.UseCRLF = true // Python's csv.writer ends rows with \r\n
	if err := c.w.Write(energy.SamplesHeader); err != nil {
		f.Close()
		return nil, err
	}
	c.w.Flush()
	c.man = Manifest{SchemaVersion: SchemaVersion, Producer: Producer, ProducerVersion: o.Version, SourceMetric: PowerMetric,
		Unit: PowerUnit, PowerScope: PowerScope, TimestampSource: ClockSource, JobID: s.JobID, RunName: s.RunName,
		SampleInterval: pyFloat(s.Interval), RequestTimeout: pyFloat(s.RequestTimeout), Required: s.Required,
		StartedAt: pyFloat(unix(o.Now())), Status: statusStarting,
		Exporter:        ExporterIdentity{Image: s.ExporterImage, Port: s.Port, Cmd: s.ExporterCommand},
		ExpectedDevices: s.Devices, ExpectedWindows: s.Windows}
	return c, c.writeManifest()
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Run collects at the settings' cadence until ctx ends, then takes a last
// scrape and writes the terminal manifest (start_and_wait_for_readiness,
// _run, stop_and_finalize). It reports whether the expected devices were
// all seen in one scrape within the startup timeout.
func (c *Collector) Run(ctx context.Context) (ready bool, err error) {
	c.man.Status = statusRunning
	if err := c.writeManifest(); err != nil {
		return false, err
	}
	deadline := c.o.Now().Add(time.Duration(c.s.StartupTimeout * float64(time.Second)))
	interval := time.Duration(c.s.Interval * float64(time.Second))
	next := time.Now()
	timedOut := false
	for ctx.Err() == nil {
		complete := c.collectOnce(context.Background())
		if complete && !ready && !timedOut {
			ready = true
			fmt.Fprintf(c.o.Log, "power: every expected GPU reported (%d devices)\n", len(c.s.Devices))
		}
		if !ready && !timedOut && c.o.Now().After(deadline) {
			timedOut = true
			c.reason(ReasonStartupTimeout)
		}
		next = next.Add(interval)
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(next)):
		}
	}
	// The final scrape after stop, as _run takes it, bounded so the manifest
	// is written before Slurm's kill wait runs out.
	fctx, cancel := context.WithTimeout(context.Background(), time.Second)
	c.collectOnce(fctx)
	cancel()
	return ready, c.finalize()
}

func (c *Collector) reason(r string) {
	c.mu.Lock()
	c.rsn = append(c.rsn, r)
	c.mu.Unlock()
}

// collectOnce polls every node concurrently and appends the rows; it says
// whether this scrape covered every expected device.
func (c *Collector) collectOnce(ctx context.Context) bool {
	c.mu.Lock()
	seq := c.seq
	c.seq++
	c.mu.Unlock()
	deadline := time.Duration(2*c.s.RequestTimeout*float64(time.Second)) + cycleGrace
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	type result struct {
		rows    []energy.Sample
		reasons []string
		dur     float64
		sim     bool
	}
	results := make([]result, len(c.s.Nodes))
	var wg sync.WaitGroup
	for i := range c.s.Nodes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := &results[i]
			url := fmt.Sprintf("http://%s:%d/metrics", c.s.Addrs[i], c.s.Port)
			start := c.o.Now()
			req, _ := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
			resp, err := c.o.Client.Do(req)
			if err != nil {
				r.reasons = []string{ReasonEndpointHTTP}
				if cctx.Err() != nil || strings.Contains(err.Error(), "Timeout") {
					r.reasons = []string{ReasonEndpointTimeout}
				}
				return
			}
			body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				r.reasons = []string{ReasonEndpointHTTP}
				return
			}
			end := c.o.Now()
			readings, reasons, sim := ParseScrape(body)
			ts := (unix(start) + unix(end)) / 2
			for _, rd := range readings {
				r.rows = append(r.rows, energy.Sample{Timestamp: ts, Seq: seq, Hostname: c.s.Nodes[i], GPUIndex: rd.GPUIndex, GPUUUID: rd.GPUUUID, PowerW: rd.PowerW})
			}
			r.reasons, r.dur, r.sim = reasons, end.Sub(start).Seconds(), sim
		}(i)
	}
	wg.Wait()
	seen := map[[2]any]bool{}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.man.ScrapeCount++
	for _, r := range results {
		c.rsn = append(c.rsn, r.reasons...)
		c.sim = c.sim || r.sim
		if r.dur > 0 && (c.man.MaxScrapeDuration == nil || pyFloat(r.dur) > *c.man.MaxScrapeDuration) {
			d := pyFloat(r.dur)
			c.man.MaxScrapeDuration = &d
		}
		for _, row := range r.rows {
			if err := c.w.Write(energy.SampleRecord(row)); err != nil {
				c.rsn = append(c.rsn, ReasonCollector)
			}
			seen[[2]any{row.Hostname, row.GPUIndex}] = true
		}
	}
	c.w.Flush()
	for _, d := range c.s.Devices {
		if !seen[[2]any{d.Hostname, d.GPUIndex}] {
			return false
		}
	}
	return len(c.s.Devices) > 0
}

// Reading is one GPU's power in one scrape.
type Reading struct {
	GPUIndex int
	GPUUUID  string
	PowerW   float64
}

// ParseScrape reads an exporter's /metrics body as parser.py does: only
// DCGM_FI_DEV_POWER_USAGE, identity from the gpu and UUID labels, MIG
// instances, missing labels, negative or non-finite values and duplicated
// GPUs dropped with their reason. simulated reports a simulated="true" label.
func ParseScrape(body []byte) (readings []Reading, reasons []string, simulated bool) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, []string{ReasonEndpointParse}, false
	}
	fam, ok := fams[PowerMetric]
	if !ok || len(fam.GetMetric()) == 0 {
		return nil, []string{ReasonMetricMissing}, false
	}
	byIndex := map[int]Reading{}
	dup := map[int]bool{}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		simulated = simulated || labels["simulated"] == "true"
		if labels["GPU_I_ID"] != "" || labels["GPU_I_PROFILE"] != "" {
			reasons = append(reasons, ReasonMIG)
			continue
		}
		idx, err := strconv.Atoi(labels["gpu"])
		if err != nil || idx < 0 {
			reasons = append(reasons, ReasonGPUIndexMissing)
			continue
		}
		uuid := strings.TrimSpace(labels["UUID"])
		if uuid == "" {
			reasons = append(reasons, ReasonGPUUUIDMissing)
			continue
		}
		v := metricValue(m)
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			reasons = append(reasons, ReasonInvalidPower)
			continue
		}
		if _, ok := byIndex[idx]; ok {
			dup[idx] = true
			continue
		}
		byIndex[idx] = Reading{GPUIndex: idx, GPUUUID: uuid, PowerW: v}
	}
	if len(dup) > 0 {
		reasons = append(reasons, ReasonDuplicateMetric)
		for i := range dup {
			delete(byIndex, i)
		}
	}
	idx := make([]int, 0, len(byIndex))
	for i := range byIndex {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		readings = append(readings, byIndex[i])
	}
	return readings, dedupe(reasons), simulated
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

// dedupe keeps each reason code once, in first-seen order (contract.dedupe).
func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// observed collapses rows into devices (derive_observed_devices).
func observed(rows []energy.Sample) ([]ObservedDevice, bool) {
	type key struct {
		h string
		g int
	}
	by := map[key][]energy.Sample{}
	for _, r := range rows {
		by[key{r.Hostname, r.GPUIndex}] = append(by[key{r.Hostname, r.GPUIndex}], r)
	}
	keys := slices.SortedFunc(maps.Keys(by), func(a, b key) int { return cmp.Or(strings.Compare(a.h, b.h), cmp.Compare(a.g, b.g)) })
	nonMono := false
	var out []ObservedDevice
	for _, k := range keys {
		rs := by[k]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Seq < rs[j].Seq })
		d := ObservedDevice{Hostname: k.h, GPUIndex: k.g}
		first, last := math.Inf(1), math.Inf(-1)
		for i, r := range rs {
			if i > 0 && r.Timestamp < rs[i-1].Timestamp {
				nonMono = true
			}
			if slices.Index(d.GPUUUIDs, r.GPUUUID) < 0 {
				d.GPUUUIDs = append(d.GPUUUIDs, r.GPUUUID)
			}
			first, last = math.Min(first, r.Timestamp), math.Max(last, r.Timestamp)
			d.times = append(d.times, r.Timestamp)
		}
		d.FirstUnix, d.LastUnix = pyFloat(first), pyFloat(last)
		sort.Float64s(d.times)
		out = append(out, d)
	}
	return out, nonMono
}

// window is a measurement window file the benchmark wrote (SA-Bench's
// measurement_window.py).
type window struct {
	BenchmarkType string   `json:"benchmark_type"`
	Concurrency   int      `json:"concurrency"`
	Status        string   `json:"status"`
	Start         *float64 `json:"benchmark_start_time_unix"`
	End           *float64 `json:"benchmark_end_time_unix"`
}

// validateWindows audits each expected window: its file, a completed
// boundary, every expected device sampled before and after it, and no gap
// between samples inside it above 3 s (windows.py validate_expected_windows,
// without its result-file cross-checks).
func (c *Collector) validateWindows(devs []ObservedDevice) []WindowValidation {
	files, _ := filepath.Glob(filepath.Join(c.s.Dir, WindowsDir, "*.json"))
	byKey := map[string][]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		var w window
		if err != nil || json.Unmarshal(data, &w) != nil {
			continue
		}
		k := fmt.Sprintf("%s/%d", w.BenchmarkType, w.Concurrency)
		byKey[k] = append(byKey[k], f)
	}
	expected := map[string]bool{}
	for _, d := range c.s.Devices {
		expected[fmt.Sprintf("%s/%d", d.Hostname, d.GPUIndex)] = true
	}
	out := []WindowValidation{}
	for _, ew := range c.s.Windows {
		v := WindowValidation{BenchmarkType: ew.BenchmarkType, Concurrency: ew.Concurrency, Reasons: []string{}, MaxGap: map[string]pyFloat{}}
		fs := byKey[fmt.Sprintf("%s/%d", ew.BenchmarkType, ew.Concurrency)]
		switch {
		case len(fs) == 0:
			v.Reasons = append(v.Reasons, ReasonWindowMissing)
		case len(fs) > 1:
			v.Reasons = append(v.Reasons, "measurement_window_duplicate")
		default:
			rel, _ := filepath.Rel(c.s.Dir, fs[0])
			v.WindowFile = &rel
			data, _ := os.ReadFile(fs[0])
			var w window
			_ = json.Unmarshal(data, &w)
			if w.Status != "completed" || w.Start == nil || w.End == nil || *w.End < *w.Start {
				v.Reasons = append(v.Reasons, ReasonWindowIncomplete)
				break
			}
			for _, d := range devs {
				name := fmt.Sprintf("%s/%d", d.Hostname, d.GPUIndex)
				if !expected[name] || len(d.GPUUUIDs) == 0 {
					continue
				}
				label := d.Hostname + "/" + d.GPUUUIDs[0]
				if float64(d.FirstUnix) > *w.Start || float64(d.LastUnix) < *w.End {
					v.Reasons = append(v.Reasons, ReasonWindowNotBracket)
					continue
				}
				gap, prev := 0.0, math.Inf(-1)
				for _, t := range d.times {
					if t < *w.Start {
						prev = t
						continue
					}
					if !math.IsInf(prev, -1) {
						gap = math.Max(gap, t-prev)
					}
					prev = t
					if t > *w.End {
						break
					}
				}
				v.MaxGap[label] = pyFloat(gap)
				if gap > maxSampleGap {
					v.Reasons = append(v.Reasons, ReasonSampleGapExceeded)
				}
			}
		}
		v.Reasons = dedupe(v.Reasons)
		if v.Reasons == nil {
			v.Reasons = []string{}
		}
		v.Valid = len(v.Reasons) == 0
		out = append(out, v)
	}
	return out
}

// finalize closes samples.csv, re-reads it and writes the terminal manifest
// (_finalize_manifest): observed devices against the expected ones, the
// window audits, the status and whether the artifacts may be published.
func (c *Collector) finalize() error {
	c.mu.Lock()
	c.w.Flush()
	werr := c.w.Error()
	c.mu.Unlock()
	if err := c.file.Close(); err != nil && werr == nil {
		werr = err
	}
	rows, sampleReasons, err := energy.ReadSamples(filepath.Join(c.s.Dir, SamplesFile))
	if err != nil {
		return err
	}
	devs, nonMono := observed(rows)
	if nonMono {
		sampleReasons = append(sampleReasons, ReasonNonMonotonic)
	}
	reasons := append(append([]string(nil), c.rsn...), sampleReasons...)
	expected := map[string]bool{}
	for _, d := range c.s.Devices {
		expected[fmt.Sprintf("%s/%d", d.Hostname, d.GPUIndex)] = true
	}
	seenObs := map[string]bool{}
	uuids := map[string]bool{}
	devValid := len(expected) > 0
	for _, d := range devs {
		k := fmt.Sprintf("%s/%d", d.Hostname, d.GPUIndex)
		seenObs[k] = true
		if !expected[k] {
			reasons, devValid = append(reasons, ReasonUnexpectedDevice), false
		}
		if len(d.GPUUUIDs) != 1 || uuids[d.GPUUUIDs[0]] {
			reasons, devValid = append(reasons, ReasonUUIDChanged), false
		}
		for _, u := range d.GPUUUIDs {
			uuids[u] = true
		}
	}
	for k := range expected {
		if !seenObs[k] {
			reasons, devValid = append(reasons, ReasonExpectedMissing), false
			break
		}
	}
	if werr != nil {
		reasons = append(reasons, ReasonCollector)
	}
	c.man.ObservedDevices = devs
	if c.man.ObservedDevices == nil {
		c.man.ObservedDevices = []ObservedDevice{}
	}
	c.man.SampleRowCount = len(rows)
	c.man.WindowValidations = c.validateWindows(devs)
	windowsValid := len(c.s.Windows) > 0
	for _, v := range c.man.WindowValidations {
		reasons = append(reasons, v.Reasons...)
		windowsValid = windowsValid && v.Valid
	}
	status := statusComplete
	switch {
	case slices.Index(reasons, ReasonCollector) >= 0:
		status = statusIncomplete
	case c.s.Required && slices.Index(reasons, ReasonStartupTimeout) >= 0:
		status = statusFailed
	}
	valid := status == statusComplete && devValid && windowsValid && len(sampleReasons) == 0
	stopped := pyFloat(unix(c.o.Now()))
	c.man.Status, c.man.StoppedAt, c.man.PublicationValid = status, &stopped, &valid
	c.man.ReasonCodes = dedupe(reasons)
	c.man.Simulated = c.sim
	fmt.Fprintf(c.o.Log, "power: status=%s publication_valid=%v reasons=%s rows=%d\n", status, valid, strings.Join(c.man.ReasonCodes, ","), len(rows))
	return c.writeManifest()
}

// writeManifest replaces manifest.json atomically (json.dumps(indent=2)
// and a newline, as atomic_write_json writes it).
func (c *Collector) writeManifest() error {
	m := c.man
	for _, l := range []*[]string{&m.ReasonCodes} {
		if *l == nil {
			*l = []string{}
		}
	}
	if m.ObservedDevices == nil {
		m.ObservedDevices = []ObservedDevice{}
	}
	if m.WindowValidations == nil {
		m.WindowValidations = []WindowValidation{}
	}
	if m.ArtifactErrors == nil {
		m.ArtifactErrors = []map[string]any{}
	}
	if m.ExpectedDevices == nil {
		m.ExpectedDevices = []srtlaunch.PowerDevice{}
	}
	if m.ExpectedWindows == nil {
		m.ExpectedWindows = []srtlaunch.PowerWindow{}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(c.s.Dir, ManifestFile), append(data, '\n'))
}
