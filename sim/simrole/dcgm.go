package simrole

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// dcgm-exporter (NVIDIA/dcgm-exporter), as srt-slurm's telemetry stage runs
// it on every worker node: `dcgm-exporter --collect-interval=100 --address
// :PORT`. It serves Prometheus text on /metrics with one
// DCGM_FI_DEV_POWER_USAGE sample per GPU (labels gpu, UUID, device,
// modelName, Hostname ...), which srt-slurm's collector reads. The values are
// the simulator's board-power model following the job's load (power.go)
// and carry simulated="true".

// dcgmFlags are dcgm-exporter's command-line flags (urfave/cli: -x and --x
// alike, "--x=v" or "--x v"; a bool flag takes no value) with whether each
// takes a value; any other flag is refused as urfave/cli refuses it.
var dcgmFlags = map[string]bool{
	"f": true, "collectors": true, "a": true, "address": true, "c": true, "collect-interval": true,
	"k": false, "kubernetes": false, "kubernetes-use-old-namespace": false, "kubernetes-virtual-gpus": false,
	"p": false, "use-old-namespace": false, "r": true, "remote-hostengine-info": true,
	"kubernetes-gpu-id-type": true, "d": true, "devices": true, "D": true, "switch-devices": true,
	"C": true, "cpu-devices": true, "n": false, "no-hostname": false, "F": false, "fake-gpus": false,
	"config-map-data": true, "m": true, "web-systemd-socket": false, "web-config-file": true,
	"X": false, "clock-events-count-window-size": true, "debug": false, "clock-throttle-reasons-count-window-size": true,
	"replace-blanks-in-model-name": false, "enable-dcgm-log": false, "dcgm-log-level": true, "pod-resources-kubelet-socket": true,
	"hpc-job-mapping-dir": true, "nvidia-resource-names": true, "kubernetes-enable-pod-labels": false,
}

// DCGMArgs are the exporter settings the simulation acts on.
type DCGMArgs struct {
	Address         string // host:port; ":9400" by default
	CollectInterval time.Duration
	NoHostname      bool
}

// ParseDCGMExporter reads `dcgm-exporter [flags]` as urfave/cli does.
func ParseDCGMExporter(argv []string) (DCGMArgs, error) {
	a := DCGMArgs{Address: ":9400", CollectInterval: 30 * time.Second}
	usage := func(format string, args ...any) error {
		return fmt.Errorf("Incorrect Usage: "+format, args...)
	}
	if len(argv) == 0 || !strings.HasSuffix(argv[0], "dcgm-exporter") {
		return a, fmt.Errorf("dcgm-exporter: not a dcgm-exporter command: %q", strings.Join(argv, " "))
	}
	for i := 1; i < len(argv); i++ {
		w := argv[i]
		if !strings.HasPrefix(w, "-") || w == "-" {
			return a, usage("unexpected argument %q", w)
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		takes, ok := dcgmFlags[name]
		if !ok {
			return a, usage("flag provided but not defined: -%s", name)
		}
		if takes && !hasVal {
			if i+1 >= len(argv) {
				return a, usage("flag needs an argument: -%s", name)
			}
			i++
			val = argv[i]
		}
		switch name {
		case "a", "address":
			a.Address = val
		case "c", "collect-interval":
			ms, err := strconv.Atoi(val)
			if err != nil || ms <= 0 {
				return a, usage("invalid value %q for flag -%s: want milliseconds > 0", val, name)
			}
			a.CollectInterval = time.Duration(ms) * time.Millisecond
		case "n", "no-hostname":
			a.NoHostname = !hasVal || val == "true"
		}
	}
	if _, port, ok := strings.Cut(a.Address, ":"); !ok || port == "" {
		return a, usage("invalid value %q for flag -address: want [host]:port", a.Address)
	}
	return a, nil
}

// runDCGMExporter serves /metrics for this node's GPUs until ctx ends.
func runDCGMExporter(ctx context.Context, argv []string, o Options) error {
	a, err := ParseDCGMExporter(argv)
	if err != nil {
		return err
	}
	_, gpus, err := stepGPUs(o.Getenv)
	if err != nil {
		return err
	}
	host := o.Getenv("SLURMD_NODENAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	// The emulated nodes are named after their GPUs (gb200-NN, gb300-NN).
	model := "NVIDIA " + strings.ToUpper(strings.SplitN(host, "-", 2)[0])
	start := time.Now()
	board := powerBoard(o.Getenv)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		// The reading advances once per collect interval, as DCGM's does.
		tick := int64(time.Since(start) / a.CollectInterval)
		// The model's draw under the job's load (power board), once a
		// collect interval, as DCGM's reading advances.
		watts := boardPower(board, host, gpus, start.Add(time.Duration(tick)*a.CollectInterval))
		var b strings.Builder
		b.WriteString("# sweepflow-sim: SIMULATED GPU telemetry (board power model)\n")
		b.WriteString("# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n")
		for g := 0; g < gpus; g++ {
			labels := fmt.Sprintf(`gpu="%d",UUID="%s",pci_bus_id="00000000:%02X:00.0",device="nvidia%d",modelName="%s"`,
				g, simGPUUUID(host, g), g+1, g, model)
			if !a.NoHostname {
				labels += fmt.Sprintf(`,Hostname="%s"`, host)
			}
			fmt.Fprintf(&b, "DCGM_FI_DEV_POWER_USAGE{%s,simulated=\"true\"} %s\n", labels, strconv.FormatFloat(simBoardPower(watts[g], g, tick), 'f', 3, 64))
		}
		_, _ = w.Write([]byte(b.String()))
	})
	s, err := listen("metrics", o.bind(portOf(a.Address)), mux)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "sweepflow-sim: SIMULATED dcgm-exporter for %d GPUs of %s, collect interval %s\n", gpus, host, a.CollectInterval)
	return serveAll(ctx, o, []*server{s}, nil)
}

func portOf(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	n, _ := strconv.Atoi(p)
	return n
}

// simGPUUUID is a stable GPU UUID for a simulated node's GPU.
func simGPUUUID(host string, gpu int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", host, gpu)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// simBoardPower is the model's draw with a deterministic ripple of up to
// ±1% per GPU and tick, so successive samples differ as real ones do.
func simBoardPower(watts float64, gpu int, tick int64) float64 {
	h := sha256.Sum256([]byte(fmt.Sprintf("%d/%d", gpu, tick)))
	ripple := (float64(h[0])/255 - 0.5) * 0.02
	return watts * (1 + ripple)
}
