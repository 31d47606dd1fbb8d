package local

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sweepflow/sweepflow/cluster"
	"github.com/sweepflow/sweepflow/energy"
)

// PowerSampler reads the host's GPU board power while a perf window runs,
// through `nvidia-smi --query-gpu=timestamp,index,uuid,power.draw
// --format=csv,noheader,nounits --loop-ms=N`: one row per GPU per loop.
//
// nvidia-smi rather than NVML itself: NVML from Go needs cgo and the
// driver's libnvidia-ml at build and run time (go-nvml), while sweepflow
// builds without cgo; nvidia-smi is NVML's own command-line client, ships
// with every driver, streams readings at the cadence asked for, and is
// what InferenceX's single-node power path reads (infx/results/power/
// single_node.py, commit 09f2cf9a35668ca90e9ff21f0adf03cffea823d2: its
// _parse_timestamp takes nvidia-smi's "YYYY/MM/DD HH:MM:SS.fff" local
// time). The readings share the worker's clock with the load generator's
// window, since both run on this host.
type PowerSampler struct {
	cmd      *exec.Cmd
	host     string
	gpus     []int
	interval time.Duration
	mu       sync.Mutex
	rows     []energy.Sample
	latest   map[int]float64 // GPU index -> newest reading's timestamp
	reasons  []string
	done     chan error
	cancel   context.CancelFunc
}

// NVIDIASMI is the command PowerSampler runs (found on PATH).
const NVIDIASMI = "nvidia-smi"

// HasNVIDIASMI says whether nvidia-smi is on PATH.
func HasNVIDIASMI() bool {
	_, err := exec.LookPath(NVIDIASMI)
	return err == nil
}

// StartPowerSampler starts nvidia-smi on gpus (all the host's when empty),
// one reading per GPU every interval.
func StartPowerSampler(ctx context.Context, gpus []int, interval time.Duration) (*PowerSampler, error) {
	if interval <= 0 {
		interval = time.Second
	}
	args := []string{"--query-gpu=timestamp,index,uuid,power.draw", "--format=csv,noheader,nounits",
		"--loop-ms=" + strconv.FormatInt(interval.Milliseconds(), 10)}
	if len(gpus) > 0 {
		ids := make([]string, len(gpus))
		for i, g := range gpus {
			ids[i] = strconv.Itoa(g)
		}
		args = append(args, "--id="+strings.Join(ids, ","))
	}
	host, _ := os.Hostname()
	cctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, NVIDIASMI, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("power: %s: %w", NVIDIASMI, err)
	}
	s := &PowerSampler{cmd: cmd, host: host, gpus: gpus, interval: interval, latest: map[int]float64{}, done: make(chan error, 1), cancel: cancel}
	go func() { s.done <- s.read(out) }()
	// The window starts after this returns, so a reading of every GPU
	// before it brackets its start (NVML's start-up can take a second).
	s.waitReadings(0, 5*time.Second+2*interval)
	return s, nil
}

// waitReadings waits, at most limit, until every GPU sampled (all that have
// reported when none were named) has a reading stamped at or after since
// (Unix seconds), or nvidia-smi has ended.
func (s *PowerSampler) waitReadings(since float64, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err // Stop reads it
			return
		default:
		}
		s.mu.Lock()
		ok := len(s.latest) > 0
		for _, g := range s.gpus {
			if _, seen := s.latest[g]; !seen {
				ok = false
			}
		}
		for _, t := range s.latest {
			ok = ok && t >= since
		}
		s.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// read parses rows until nvidia-smi's output ends. A scrape is one
// timestamp; a row that does not parse is dropped with its reason, as
// samples.csv's reader drops a malformed row.
func (s *PowerSampler) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	seq, last := -1, ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		row, err := ParseSMIRow(line, s.host)
		s.mu.Lock()
		if err != nil {
			if !strings.Contains(strings.Join(s.reasons, ","), energy.ReasonMalformed) {
				s.reasons = append(s.reasons, energy.ReasonMalformed)
			}
			s.mu.Unlock()
			continue
		}
		if ts := strings.SplitN(line, ",", 2)[0]; ts != last {
			seq, last = seq+1, ts
		}
		row.Seq = seq
		s.rows = append(s.rows, row)
		s.latest[row.GPUIndex] = max(s.latest[row.GPUIndex], row.Timestamp)
		s.mu.Unlock()
	}
	return sc.Err()
}

// Stop waits for a reading of every GPU past the moment it is called (the
// window has ended by then: InferenceX's gate wants the window bracketed,
// and at a 1 s loop the last reading is up to a second before its end),
// then ends nvidia-smi and returns the readings and the reasons rows were
// dropped.
func (s *PowerSampler) Stop() ([]energy.Sample, []string) {
	s.waitReadings(float64(time.Now().UnixNano())/1e9, 2*s.interval+time.Second)
	s.cancel()
	<-s.done
	_ = s.cmd.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows, s.reasons
}

// smiTime is nvidia-smi's timestamp layout (local time).
const smiTime = "2006/01/02 15:04:05.000"

// ParseSMIRow reads one row of `--query-gpu=timestamp,index,uuid,power.draw
// --format=csv,noheader,nounits` on host. A power.draw of "[N/A]" or
// "[Not Supported]" is an error: the GPU reports no power.
func ParseSMIRow(line, host string) (energy.Sample, error) {
	f := strings.Split(line, ",")
	if len(f) != 4 {
		return energy.Sample{}, fmt.Errorf("nvidia-smi: %d fields in %q, want timestamp, index, uuid, power.draw", len(f), line)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	ts, err := time.ParseInLocation(smiTime, f[0], time.Local)
	if err != nil {
		return energy.Sample{}, fmt.Errorf("nvidia-smi: timestamp %q: %w", f[0], err)
	}
	idx, err := strconv.Atoi(f[1])
	if err != nil || idx < 0 {
		return energy.Sample{}, fmt.Errorf("nvidia-smi: index %q is not a GPU index", f[1])
	}
	if f[2] == "" {
		return energy.Sample{}, fmt.Errorf("nvidia-smi: empty uuid in %q", line)
	}
	w, err := strconv.ParseFloat(f[3], 64)
	if err != nil {
		return energy.Sample{}, fmt.Errorf("nvidia-smi: power.draw %q of GPU %d: %w", f[3], idx, err)
	}
	return energy.Sample{Timestamp: float64(ts.UnixNano()) / 1e9, Hostname: host, GPUIndex: idx, GPUUUID: f[2], PowerW: w}, nil
}

// StartPower samples the allocation's GPUs (0..gpus-1 of this host, the
// devices the served process sees) with nvidia-smi at a 1 s loop, the
// cadence srt-slurm's collector and InferenceX's rules assume. Without
// nvidia-smi on PATH the host has no power source.
func (b *Backend) StartPower(ctx context.Context, alloc cluster.Allocation, _ cluster.Server, gpus int) (cluster.PowerRun, string, error) {
	if !HasNVIDIASMI() || gpus <= 0 {
		return nil, "", nil
	}
	ids := make([]int, gpus)
	for i := range ids {
		ids[i] = i
	}
	s, err := StartPowerSampler(context.WithoutCancel(ctx), ids, time.Second)
	if err != nil {
		return nil, energy.SourceNVML, err
	}
	return nvmlRun{s: s, gpus: ids}, energy.SourceNVML, nil
}

type nvmlRun struct {
	s    *PowerSampler
	gpus []int
}

func (r nvmlRun) Stop(context.Context) ([]energy.Sample, []energy.Device, []string, error) {
	rows, reasons := r.s.Stop()
	devs := make([]energy.Device, len(r.gpus))
	for i, g := range r.gpus {
		devs[i] = energy.Device{Hostname: r.s.host, GPUIndex: g, Role: energy.RoleAgg}
	}
	return rows, devs, reasons, nil
}
