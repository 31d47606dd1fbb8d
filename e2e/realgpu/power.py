#!/usr/bin/env python3
"""Samples GPU 0's power for the real-GPU run until it is stopped (SIGTERM).

Through NVML (the nvidia-ml-py package) when it is there: the board power
reading and the total energy counter, whose difference over a window gives
its mean power independently of the sampling. Otherwise through nvidia-smi
--loop-ms. One CSV row per sample, stamped with this host's Unix time:

    unix_s,power_w,energy_j,gpu_util_pct,mem_used_mib,sm_clock_mhz,temp_c

energy_j is empty under nvidia-smi. The settings of the card are only read.

    power.py --out samples.csv [--interval-ms 100]
"""
import argparse
import signal
import subprocess
import sys
import time

HEADER = "unix_s,power_w,energy_j,gpu_util_pct,mem_used_mib,sm_clock_mhz,temp_c\n"


def nvml_loop(out, interval, stop):
    import pynvml as n

    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    name = n.nvmlDeviceGetName(h)
    limit = n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000
    print(f"power.py: NVML, {name if isinstance(name, str) else name.decode()}, power limit {limit:.0f} W", file=sys.stderr, flush=True)
    while not stop[0]:
        t = time.time()
        p = n.nvmlDeviceGetPowerUsage(h) / 1000
        try:
            e = n.nvmlDeviceGetTotalEnergyConsumption(h) / 1000
        except n.NVMLError:
            e = ""
        u = n.nvmlDeviceGetUtilizationRates(h).gpu
        m = n.nvmlDeviceGetMemoryInfo(h).used / 2**20
        c = n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)
        tc = n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)
        out.write(f"{t:.3f},{p:.2f},{e},{u},{m:.0f},{c},{tc}\n")
        out.flush()
        time.sleep(max(interval - (time.time() - t), 0))


def smi_loop(out, interval, stop):
    q = "power.draw,utilization.gpu,memory.used,clocks.sm,temperature.gpu"
    p = subprocess.Popen(["nvidia-smi", "-i", "0", f"--query-gpu={q}", "--format=csv,noheader,nounits", f"--loop-ms={int(interval*1000)}"],
                         stdout=subprocess.PIPE, text=True)
    print("power.py: nvidia-smi --loop-ms", file=sys.stderr, flush=True)
    for line in p.stdout:
        if stop[0]:
            break
        f = [x.strip() for x in line.split(",")]
        if len(f) != 5:
            continue
        out.write(f"{time.time():.3f},{f[0]},,{f[1]},{f[2]},{f[3]},{f[4]}\n")
        out.flush()
    p.terminate()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval-ms", type=float, default=100)
    a = ap.parse_args()
    stop = [False]

    def halt(*_):
        stop[0] = True

    signal.signal(signal.SIGTERM, halt)
    signal.signal(signal.SIGINT, halt)
    with open(a.out, "w") as out:
        out.write(HEADER)
        try:
            nvml_loop(out, a.interval_ms / 1000, stop)
        except ImportError:
            smi_loop(out, a.interval_ms / 1000, stop)


if __name__ == "__main__":
    main()
